"""Simulator: determinism, crashes, idle time, learning, the event engine."""

from __future__ import annotations

import dataclasses

import pytest
from edgeps.sim.engine import EventLoop
from edgeps.sim.simulator import Simulator, simulate
from edgeps.sim.types import SimConfig

SMALL = SimConfig(n_workers=4, max_time=8.0, eval_interval=0.5, lr=0.05)


def test_same_seed_same_run_and_other_seed_other_run() -> None:
    # Prepare
    cfg = dataclasses.replace(SMALL, policy="dsp", scenario="mixed", seed=5)
    # Execute
    a, b = simulate(cfg), simulate(cfg)
    c = simulate(cfg, seed=6)
    # Assert
    assert a.trace == b.trace
    assert (a.applied, a.rejected, a.idle_fraction) == (
        b.applied,
        b.rejected,
        b.idle_fraction,
    )
    assert a.trace != c.trace


def test_accuracy_improves_over_time_with_real_gradients() -> None:
    r = simulate(dataclasses.replace(SMALL, policy="asp", scenario="homogeneous"))
    first, last = r.trace[0][1], r.trace[-1][1]
    assert first < 0.4  # about chance for 6 classes at the start
    assert last > first + 0.4
    assert r.final_accuracy > 0.8
    assert r.time_to_target is None or r.time_to_target <= SMALL.max_time


def test_a_crashed_worker_does_not_stall_the_barrier_and_rejoins() -> None:
    # Prepare: under BSP every update waits for every live worker
    cfg = dataclasses.replace(
        SMALL, policy="bsp", scenario="churn", n_workers=4, max_time=40.0, seed=1
    )
    sim = Simulator(cfg)
    (crasher,) = [w for w in sim.workers.values() if w.profile.crash_at is not None]
    crash, rejoin = crasher.profile.crash_at, crasher.profile.rejoin_at
    assert crash is not None and rejoin is not None
    # Execute
    sim.run()
    # Assert: the others kept training while it was down (after the liveness
    # timeout), and it pushed again after rejoining as a new incarnation
    down = [
        wid
        for t, wid in sim.applied_at
        if crash + cfg.liveness_timeout + 0.5 < t < rejoin
    ]
    assert len(down) > 20 and crasher.worker_id not in down
    assert any(t > rejoin and wid == crasher.worker_id for t, wid in sim.applied_at)
    assert crasher.incarnation == 1


def test_bsp_idles_more_than_asp_with_stragglers() -> None:
    cfg = dataclasses.replace(SMALL, scenario="stragglers", n_workers=8)
    bsp = simulate(cfg, policy="bsp")
    asp = simulate(cfg, policy="asp")
    assert bsp.idle_fraction > asp.idle_fraction + 0.2
    assert asp.updates_per_s > 2 * bsp.updates_per_s
    assert bsp.max_staleness < asp.max_staleness


def test_lossy_links_cause_redeliveries_that_are_rejected_not_applied() -> None:
    r = simulate(dataclasses.replace(SMALL, policy="asp", scenario="mixed", seed=2))
    assert r.rejected.get("duplicate", 0) + r.rejected.get("stale_seq", 0) > 0
    assert r.applied > 0


def test_bad_configs_are_rejected() -> None:
    with pytest.raises(ValueError):
        SimConfig(lr=0.0)
    with pytest.raises(ValueError):
        SimConfig(target_accuracy=1.5)
    with pytest.raises(ValueError):
        SimConfig(heartbeat_interval=5.0, liveness_timeout=3.0)
    with pytest.raises(ValueError):
        Simulator(dataclasses.replace(SMALL, model="mlp:8-4-6"))
    with pytest.raises(ValueError):
        Simulator(dataclasses.replace(SMALL, policy="fastest"))
    with pytest.raises(ValueError):
        Simulator(dataclasses.replace(SMALL, scenario="storm"))


def test_event_loop_runs_in_time_order_with_stable_ties() -> None:
    # Prepare
    loop = EventLoop()
    seen: list[str] = []
    loop.at(2.0, seen.append, "c")
    loop.at(1.0, seen.append, "a")
    loop.at(1.0, seen.append, "b")
    loop.at(5.0, seen.append, "late")
    # Execute
    loop.run_until(3.0)
    # Assert
    assert seen == ["a", "b", "c"]
    assert loop.now == 3.0 and len(loop) == 1


def test_event_loop_rejects_bad_times_and_bounds_its_work() -> None:
    loop = EventLoop()
    with pytest.raises(ValueError):
        loop.at(float("nan"), print)
    with pytest.raises(ValueError):
        loop.after(-1.0, print)

    def forever() -> None:
        loop.after(0.0, forever)

    loop.after(0.0, forever)
    with pytest.raises(RuntimeError, match="budget"):
        loop.run_until(1.0, max_events=100)


def test_lossy_links_never_stall_a_barrier() -> None:
    # a join delivered twice (its acknowledgement lost) once restarted the
    # release numbers, so the board took every later release for a redelivery
    from edgeps.sim.simulator import simulate as run_sim

    result = run_sim(policy="bsp", scenario="lossy", max_time=6.0)
    assert result.rejected.get("duplicate", 0) > 0  # the links did lose messages
    assert result.applied > 50  # it stalled at 14 with the bug


def test_a_run_that_stops_at_the_target_is_the_same_run_cut_short() -> None:
    # Prepare: a job that reaches a modest target well inside its time
    cfg = dataclasses.replace(SMALL, policy="asp", scenario="homogeneous",
                              target_accuracy=0.6)  # fmt: skip
    # Execute
    full = simulate(cfg)
    cut = simulate(cfg, stop_at_target=True)
    # Assert: the same time to the target and bytes there, and nothing after it
    assert full.time_to_target is not None
    assert cut.time_to_target == full.time_to_target
    assert cut.trace == full.trace[: len(cut.trace)] and cut.trace[-1][0] == (
        cut.time_to_target
    )
    assert cut.bytes_up_per_board == full.bytes_up_per_board
    assert cut.stop_reason == "target_accuracy" and full.stop_reason == "max_time"
    assert 0 < cut.applied < full.applied


def test_boards_join_at_their_join_times_and_none_given_is_every_board_at_zero() -> (
    None
):
    # Prepare: boards 2 and 3 of 4 join 2 s in; board 0's time 0 is the start
    cfg = dataclasses.replace(SMALL, policy="asp", scenario="homogeneous",
                              max_time=4.0)  # fmt: skip
    late = dataclasses.replace(cfg, join_times=(0.0, 0.0, 2.0, 2.0))
    # Execute
    base, zeros = Simulator(cfg), Simulator(dataclasses.replace(cfg, join_times=(0,)))
    sim = Simulator(late)
    a, b, r = base.run(), zeros.run(), sim.run()
    # Assert: nothing from a late board before it joined; the others at once
    ids = list(sim.workers)
    first = {w: min(t for t, x in sim.applied_at if x == w) for w in ids}
    assert first[ids[2]] > 2.0 and first[ids[3]] > 2.0
    assert first[ids[0]] < 1.0 and first[ids[1]] < 1.0
    assert r.applied < a.applied and a.trace == b.trace
    with pytest.raises(ValueError, match="join_times"):
        SimConfig(join_times=(0.0, -1.0))


def test_admitted_on_first_push_a_straggler_holds_no_round_before_it_pushes() -> None:
    # Prepare: FedAvg rounds of 8 local steps; a quarter of the boards 4x slower
    cfg = SimConfig(policy="fedavg", scenario="stragglers", n_workers=8,
                    local_steps=8, max_time=3.0, target_accuracy=1.0)  # fmt: skip
    # Execute
    old, new = (
        Simulator(cfg),
        Simulator(dataclasses.replace(cfg, admit_on_first_push=True)),
    )
    old.run()
    new.run()

    # Assert: from its join, the first round waits for the stragglers (about
    # 3.2 s); as serve admits, the fast boards go on without them meanwhile
    def per_worker(sim: Simulator) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, w in sim.applied_at:
            out[w] = out.get(w, 0) + 1
        return out

    assert max(per_worker(old).values()) == 1
    assert max(per_worker(new).values()) >= 2
