"""ParameterServer unit tests: validation, exactly-once, liveness, rejoin, reporting."""

from __future__ import annotations

import json

import numpy as np
import pytest
from edgeps import kernels
from edgeps.core import ParameterServer
from edgeps.core.types import (
    Applied,
    Heartbeat,
    Held,
    Join,
    Leave,
    Push,
    Rejected,
    Release,
    Tick,
    WorkerLeft,
    WorkerState,
    WorkerStats,
)
from edgeps.policy import parse_policy
from edgeps.policy.bsp import BSP

N = 3


def grad(value: float = 1.0) -> np.ndarray:
    return np.full(N, value, np.float32)


def make_server(policy: str = "bsp", **kw: object) -> ParameterServer:
    """A server over N zeros; the policy's text form is read here, at the edge."""
    return ParameterServer(np.zeros(N, np.float32), policy=parse_policy(policy), **kw)  # type: ignore[arg-type]


class Worker:
    """A well-behaved worker: counts its own clock and seq, tracks its base version."""

    def __init__(self, ps: ParameterServer, wid: str, now: float = 0.0, inc: int = 0):
        self.ps, self.wid, self.inc = ps, wid, inc
        self.clock, self.seq, self.base = 0, -1, 0
        acts = ps.handle(Join(wid, inc), now)
        self.base = released_version(acts, wid)

    def push(self, now: float, g: np.ndarray | None = None, compute: float = 0.0):
        self.clock += 1
        self.seq += 1
        p = Push(
            self.wid, self.clock, self.seq, self.base,
            grad() if g is None else g, compute, 1, self.inc,
        )  # fmt: skip
        self.last = p
        acts = self.ps.handle(p, now)
        v = released_version(acts, self.wid)
        if v is not None:
            self.base = v
        return acts


def released_version(actions: list, wid: str) -> int | None:
    for a in actions:
        if isinstance(a, Release) and wid in a.worker_ids:
            return int(a.version)
    return None


def reasons(actions: list) -> list[str]:
    return [a.reason for a in actions if isinstance(a, Rejected)]


def test_join_releases_the_new_worker_with_the_current_version() -> None:
    ps = make_server("asp")
    a = Worker(ps, "a")
    a.push(1.0)
    acts = ps.handle(Join("b"), 2.0)
    assert acts == [Release(("b",), 1)]


def test_push_is_applied_with_sgd_and_bumps_the_version() -> None:
    ps = make_server("asp", lr=0.5)
    a = Worker(ps, "a")
    acts = a.push(1.0, grad(2.0))
    version, params = ps.params_snapshot()
    assert acts[0] == Applied("a", 0, 1, 0)
    assert version == 1 and np.allclose(params, -1.0)


def test_snapshot_is_a_copy() -> None:
    ps = make_server("asp")
    _, params = ps.params_snapshot()
    params[:] = 7
    assert np.all(ps.params_snapshot()[1] == 0)


def test_duplicate_and_replayed_pushes_are_counted_and_dropped() -> None:
    ps = make_server("asp")
    a = Worker(ps, "a")
    a.push(1.0)
    first = a.last
    a.push(2.0)
    dup = ps.handle(a.last, 3.0)
    replay = ps.handle(first, 3.0)
    assert reasons(dup) == ["duplicate"] and reasons(replay) == ["stale_seq"]
    assert ps.version == 2
    assert ps.stats()["a"].rejected == {"duplicate": 1, "stale_seq": 1}


def test_redelivered_rejected_push_is_not_released_twice() -> None:
    ps = make_server("bsp")
    a = Worker(ps, "a")
    bad = a.push(1.0, np.full(N, np.nan, np.float32))
    again = ps.handle(a.last, 1.5)
    assert reasons(bad) == ["non_finite"] and released_version(bad, "a") == 0
    assert again == [Rejected("a", 0, "duplicate")]


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        (np.zeros(N + 1, np.float32), "bad_shape"),
        (np.zeros(N, np.float64), "bad_shape"),
        (np.zeros((N, 1), np.float32), "bad_shape"),
        ([0.0] * N, "bad_shape"),
        (np.array([0, np.inf, 0], np.float32), "non_finite"),
    ],
)
def test_an_unusable_update_is_refused_and_still_answers_the_barrier(
    update: object, reason: str
) -> None:
    ps = make_server("bsp", max_update_norm=10.0)
    a = Worker(ps, "a")
    b = Worker(ps, "b")
    acts = a.push(1.0, update)  # type: ignore[arg-type]
    assert reasons(acts) == [reason]
    assert released_version(acts, "a") is None  # held for the round, like a push
    assert ps.version == 0 and ps.stats()["a"].rejected == {reason: 1}
    closing = b.push(1.5)
    assert released_version(closing, "a") == 1  # b's push closed the round


def test_an_update_above_max_update_norm_is_clipped_to_it() -> None:
    ps = make_server("bsp", max_update_norm=10.0)
    a = Worker(ps, "a")
    _, before = ps.params_snapshot()
    acts = a.push(1.0, np.full(N, 100.0, np.float32))
    moved = float(np.linalg.norm(ps.params_snapshot()[1] - before))
    assert reasons(acts) == [] and ps.version == 1
    assert moved == pytest.approx(ps.model.lr * 10.0, rel=1e-4)
    assert ps.model.clipped == 1 and ps.stats()["a"].rejected == {}


def test_unknown_dead_and_wrong_session_pushes_are_rejected() -> None:
    ps = make_server("asp")
    a = Worker(ps, "a")
    ghost = Push("ghost", 1, 0, 0, grad())
    future = Push("a", 1, 0, 0, grad(), session=5)
    r1 = ps.handle(ghost, 1.0)
    r2 = ps.handle(future, 1.0)
    ps.handle(Leave("a", "bye"), 2.0)
    r3 = a.push(3.0)
    assert reasons(r1) == ["unknown_worker"]
    assert reasons(r2) == ["stale_session"]
    assert reasons(r3) == ["dead_worker"]
    assert ps.rejected_unregistered == {"unknown_worker": 1}


def test_bad_clock_and_version_are_rejected() -> None:
    ps = make_server("asp")
    Worker(ps, "a")
    zero_clock = Push("a", 0, 0, 0, grad())
    future_base = Push("a", 1, 1, 99, grad())
    assert reasons(ps.handle(zero_clock, 1.0)) == ["bad_clock"]
    assert reasons(ps.handle(future_base, 1.0)) == ["bad_version"]
    assert ps.version == 0


def test_push_while_held_breaks_protocol_and_is_rejected() -> None:
    ps = make_server("bsp")
    a = Worker(ps, "a")
    Worker(ps, "b")
    assert isinstance(a.push(1.0)[-1], Held)
    acts = a.push(2.0)
    assert reasons(acts) == ["not_released"] and ps.version == 1


def test_staleness_aware_step_divides_lr_by_staleness_plus_one() -> None:
    ps = make_server("asp", lr=1.0, staleness_aware=True)
    a, b = Worker(ps, "a"), Worker(ps, "b")
    a.push(1.0)  # version 1, b still on version 0
    acts = b.push(2.0)
    _, params = ps.params_snapshot()
    assert acts[0] == Applied("b", 0, 2, 1)
    assert np.allclose(params, -1.5)  # -1 (fresh) - 1/2 (stale by 1)
    assert ps.max_staleness_seen == 1 and ps.stats()["b"].max_staleness == 1


def test_optimizer_object_is_used() -> None:
    opt = kernels.make_optimizer("momentum", N, momentum=0.9)
    ps = ParameterServer(
        np.zeros(N, np.float32), policy=parse_policy("asp"), optimizer=opt, lr=1.0
    )
    a = Worker(ps, "a")
    a.push(1.0)
    a.push(2.0)
    assert np.allclose(ps.params_snapshot()[1], -(1.0 + 1.9))


def test_leave_frees_workers_waiting_on_the_leaver() -> None:
    ps = make_server("bsp")
    a = Worker(ps, "a")
    Worker(ps, "b")
    a.push(1.0)
    acts = ps.handle(Leave("b", "last_will"), 2.0)
    assert acts == [WorkerLeft("b", "last_will"), Release(("a",), 1)]


def test_silent_worker_times_out_and_releases_the_barrier() -> None:
    ps = make_server("bsp", liveness_timeout=10.0)
    a = Worker(ps, "a")
    Worker(ps, "b")
    a.push(1.0)
    early = ps.handle(Tick(), 6.0)
    late = ps.handle(Tick(), 10.5)
    assert early == [] and ps.worker_state("b") is WorkerState.DEAD
    assert late == [WorkerLeft("b", "timeout"), Release(("a",), 1)]


def test_silence_past_half_the_timeout_is_suspected_until_heard_again() -> None:
    ps = make_server("bsp", liveness_timeout=10.0)
    Worker(ps, "a")
    ps.handle(Tick(), 6.0)
    suspected = ps.worker_state("a")
    ps.handle(Heartbeat("a"), 7.0)
    assert suspected is WorkerState.SUSPECTED
    assert ps.worker_state("a") is WorkerState.LIVE


def test_held_worker_is_not_timed_out() -> None:
    ps = make_server("bsp", liveness_timeout=10.0)
    a, b = Worker(ps, "a"), Worker(ps, "b")
    a.push(1.0)
    ps.handle(Heartbeat("b"), 9.0)
    acts = ps.handle(Tick(), 15.0)
    assert acts == [] and ps.worker_state("a") is WorkerState.LIVE
    assert b.push(16.0)[-1] == Release(("a", "b"), 2)


def test_restart_gets_a_new_session_resets_seq_and_gets_current_version() -> None:
    ps = make_server("asp")
    a = Worker(ps, "a")
    a.push(1.0)
    a.push(2.0)
    ps.handle(Leave("a", "last_will"), 2.5)  # the old process's link dropped
    again = Worker(ps, "a", now=3.0, inc=1)
    acts = again.push(4.0)
    assert again.base == 3 and acts[0] == Applied("a", 0, 3, 0)
    assert ps.stats()["a"].accepted == 3  # stats survive the restart
    assert reasons(ps.handle(a.last, 5.0)) == ["stale_session"]


def test_rehello_of_held_worker_stays_held_and_lost_release_is_resent() -> None:
    ps = make_server("bsp")
    a, b = Worker(ps, "a"), Worker(ps, "b")
    a.push(1.0)
    held = ps.handle(Join("a", 0), 2.0)
    resent = ps.handle(Join("b", 0), 2.0)
    assert held == [Held("a", 1)] and resent == [Release(("b",), 1)]
    assert b.push(3.0)[-1] == Release(("a", "b"), 2)


def test_hello_of_another_process_for_a_live_id_is_refused() -> None:
    ps = make_server("asp")
    Worker(ps, "a", inc=3).push(0.5)  # its push proves the session
    assert reasons(ps.handle(Join("a", 2), 1.0)) == ["duplicate_id"]
    # once the live one has been silent past the liveness timeout, it may take over
    assert reasons(ps.handle(Join("a", 2), 11.0)) == []
    assert ps.worker_state("a") is WorkerState.LIVE


def test_joiner_starts_level_with_the_slowest_live_worker() -> None:
    ps = make_server("bsp")
    a, b = Worker(ps, "a"), Worker(ps, "b")
    for t in range(3):
        a.push(2.0 * t + 1)
        b.push(2.0 * t + 2)
    Worker(ps, "c", now=10.0)
    assert ps.view.clock("c") == 3 and ps.view.min_live_clock() == 3


def test_monitor_sees_compute_comm_and_iteration_times() -> None:
    ps = make_server("asp")
    a = Worker(ps, "a", now=0.0)
    a.push(1.0, compute=0.6)
    assert ps.monitor.typical_iteration("a") == pytest.approx(1.0)
    assert ps.monitor.typical_compute("a") == pytest.approx(0.6)
    assert ps.monitor.typical_comm("a") == pytest.approx(0.4)


def test_snapshot_is_json_able_and_reports_workers() -> None:
    ps = make_server("ssp:1")
    a = Worker(ps, "a")
    Worker(ps, "b")
    a.push(1.0)
    a.push(2.0)
    snap = json.loads(json.dumps(ps.snapshot(3.0)))
    assert snap["version"] == 2 and snap["policy"] == "ssp:1"
    assert snap["workers"]["a"]["waiting"] is True
    assert snap["workers"]["b"]["lag"] == 2 and snap["workers"]["a"]["clock"] == 2


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"params": np.zeros(3)}, ValueError),
        ({"params": [0.0, 1.0]}, TypeError),
        ({"params": np.zeros((2, 2), np.float32)}, ValueError),
        ({"params": np.array([np.nan], np.float32)}, ValueError),
        ({"policy": "nope"}, ValueError),
        ({"policy": 3}, TypeError),
        ({"lr": 0.0}, ValueError),
        ({"liveness_timeout": -1}, ValueError),
        ({"optimizer": "lbfgs"}, ValueError),
        ({"optimizer": kernels.make_optimizer("sgd", 7)}, ValueError),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs: dict, error: type) -> None:
    args: dict = {"params": np.zeros(N, np.float32), "policy": "bsp"} | kwargs
    params = args.pop("params")
    with pytest.raises(error):
        # text forms are read at the edge, as the CLI and the simulator do
        if isinstance(args["policy"], str):
            args["policy"] = parse_policy(args["policy"])
        ParameterServer(params, **args)


def test_the_core_takes_a_policy_object_not_its_text() -> None:
    with pytest.raises(TypeError, match="must be a Policy"):
        ParameterServer(np.zeros(N, np.float32), policy="bsp")  # type: ignore[arg-type]


def test_public_entry_points_reject_caller_mistakes() -> None:
    ps = make_server("bsp")
    with pytest.raises(TypeError):
        ps.handle(Join(5), 0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ps.handle(Join("a"), float("nan"))
    with pytest.raises(ValueError):
        ps.handle(Join("a", -1), 0.0)
    with pytest.raises(TypeError):
        ps.handle("not a push", 0.0)  # type: ignore[arg-type]


def test_restore_sets_version_optimizer_state_and_params() -> None:
    src = kernels.make_optimizer("momentum", N)
    src.step(np.zeros(N, np.float32), grad(), 1.0)
    ps = ParameterServer(
        np.zeros(N, np.float32), policy=parse_policy("asp"), optimizer="momentum"
    )
    ps.restore(version=41, optimizer_state=src.state_dict(), params=grad(3.0))
    acts = ps.handle(Join("a"), 0.0)
    assert acts == [Release(("a",), 41)]
    assert np.all(ps.params_snapshot()[1] == 3.0) and ps.model.optimizer.t == 1


def test_restore_carries_worker_counters_over_to_a_rejoin() -> None:
    # Prepare: a checkpoint knew worker "a" with 7 accepted, 2 duplicates
    ps = make_server("asp")
    carried = WorkerStats(accepted=7, rejected={"duplicate": 2}, max_staleness=3)
    ps.restore(version=5, worker_stats={"a": carried})
    # Execute
    a = Worker(ps, "a")
    a.push(1.0)
    b = Worker(ps, "b")
    b.push(2.0)
    # Assert: "a" goes on from its counters, a newcomer starts from zero
    stats = ps.stats()
    assert stats["a"].accepted == 8 and stats["a"].rejected == {"duplicate": 2}
    assert stats["b"].accepted == 1 and stats["b"].rejected == {}
    assert ps.max_staleness_seen >= 3
    with pytest.raises(TypeError):
        make_server("asp").restore(version=1, worker_stats={"a": {"accepted": 1}})  # type: ignore[dict-item]


def test_restore_rejects_bad_input_and_late_calls() -> None:
    ps = make_server("asp")
    with pytest.raises(ValueError):
        ps.restore(version=-1)
    with pytest.raises(ValueError):
        ps.restore(version=1, params=np.zeros(N + 1, np.float32))
    with pytest.raises(ValueError):
        ps.restore(version=1, optimizer_state={"name": "adam"})
    Worker(ps, "a")
    with pytest.raises(ValueError):
        ps.restore(version=1)
    assert ps.version == 0


def test_a_refused_checkpoint_changes_nothing() -> None:
    # Prepare: a checkpoint whose params fit but whose stats do not
    ps = make_server("asp")
    before = ps.params_snapshot()[1]
    bad = {"a": WorkerStats(accepted=1), "b": {"accepted": 1}}
    # Execute
    with pytest.raises(TypeError):
        ps.restore(version=9, params=grad(3.0), worker_stats=bad)  # type: ignore[dict-item]
    # Assert: neither the version, the params nor the counters moved
    assert ps.version == 0 and np.array_equal(ps.params_snapshot()[1], before)
    Worker(ps, "a").push(1.0)
    assert ps.stats()["a"].accepted == 1


class NeverPolicy(BSP):
    """A broken policy that holds everyone forever."""

    def may_proceed(self, view, worker_id, now):  # type: ignore[no-untyped-def]
        return False


def test_a_policy_that_holds_everyone_cannot_deadlock_the_server() -> None:
    ps = ParameterServer(np.zeros(N, np.float32), policy=NeverPolicy())
    a, b = Worker(ps, "a"), Worker(ps, "b")
    a.push(1.0)
    a.push(1.5)  # rejected: a was never released
    acts = b.push(2.0)
    assert acts[-1] == Release(("a", "b"), 2) and ps.forced_releases == 1
