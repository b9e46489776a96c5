"""Bounded admission: ids that never push hold no barrier and cost bounded memory."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.admission import Admission
from edgeps.core.types import (
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
)
from edgeps.policy.bsp import BSP

N = 3
TIMEOUT = 10.0


def make_server(**limits: int) -> ParameterServer:
    return ParameterServer(
        np.zeros(N, np.float32),
        policy=BSP(),
        liveness_timeout=TIMEOUT,
        admission=Admission(on_first_push=True, **limits),
    )


class Honest:
    """A worker that pushes whenever it is released."""

    def __init__(self, ps: ParameterServer, wid: str, now: float) -> None:
        self.ps, self.wid = ps, wid
        self.clock, self.seq, self.base = 0, 0, 0
        self.session = 1000 + len(wid)
        acts = ps.handle(Join(wid, self.session, nonce=1), now)
        assert released(acts, wid) is not None

    def push(self, now: float) -> list:
        self.clock += 1
        self.seq += 1
        update = np.full(N, 0.01, np.float32)
        push = Push(self.wid, self.clock, self.seq, self.base, update,
                    session=self.session)  # fmt: skip
        return self.ps.handle(push, now)


def joining(ps: ParameterServer, wid: str) -> bool:
    return bool(ps.snapshot(0.0)["workers"][wid]["state"] == "joining")


def released(actions: list, wid: str) -> int | None:
    for a in actions:
        if isinstance(a, Release) and wid in a.worker_ids:
            return int(a.version)
    return None


def warm_up(workers: list[Honest], now: float) -> None:
    """Each enters the barrier with its first push; the first, released alone
    (it was the only one live), pushes again to catch up: all level, released."""
    for w in workers:
        keep_base(workers, w.push(now))
    keep_base(workers, workers[0].push(now))


def keep_base(workers: list[Honest], actions: list) -> None:
    for a in actions:
        if isinstance(a, Release):
            for h in workers:
                if h.wid in a.worker_ids:
                    h.base = a.version


def run_round(workers: list[Honest], now: float) -> set[str]:
    """Every worker pushes once; the ids released by the last push."""
    out: set[str] = set()
    for w in workers:
        for a in w.push(now):
            if isinstance(a, Release):
                out.update(a.worker_ids)
                for wid in a.worker_ids:
                    for h in workers:
                        if h.wid == wid:
                            h.base = a.version
    return out


def test_ids_that_joined_and_never_pushed_do_not_hold_bsp() -> None:
    # Prepare: 4 honest workers in lockstep, then 500 made-up ids say hello
    ps = make_server()
    honest = [Honest(ps, f"h{i}", 0.0) for i in range(4)]
    warm_up(honest, 0.1)
    assert run_round(honest, 0.15) == {w.wid for w in honest}
    for i in range(500):
        ps.handle(Join(f"fake{i}", 5000 + i, nonce=7), 0.2)
    # Execute: a round of the honest workers, well within the liveness timeout
    freed = run_round(honest, 0.3)
    # Assert
    assert freed == {w.wid for w in honest}, (
        "HELD: BSP waited for ids that never pushed"
    )
    assert ps.view.n_live == 4
    assert joining(ps, "fake0")


def test_a_joining_worker_enters_the_barrier_with_its_first_push() -> None:
    # Prepare: a and b run two rounds; c joins late
    ps = make_server()
    a, b = Honest(ps, "a", 0.0), Honest(ps, "b", 0.0)
    warm_up([a, b], 0.1)
    run_round([a, b], 0.2)
    c = Honest(ps, "c", 0.3)
    # Execute: a pushes (held: b has not); c's first push enters it
    held_a = a.push(0.4)
    first_c = c.push(0.5)
    # Assert: c entered level with the slowest and now waits with a for b
    assert any(isinstance(x, Held) for x in held_a)
    assert ps.view.n_live == 3 and not joining(ps, "c")
    assert released(first_c, "c") is None and ps.view.clock("c") == ps.view.clock("a")
    freed = b.push(0.6)
    assert set(next(x for x in freed if isinstance(x, Release)).worker_ids) == {
        "a", "b", "c"}  # fmt: skip


def test_a_silent_joining_id_is_forgotten_after_the_liveness_timeout() -> None:
    ps = make_server()
    ps.handle(Join("ghost", 5, nonce=3), 0.0)
    ps.handle(Tick(), TIMEOUT - 1)
    assert joining(ps, "ghost")
    ps.handle(Tick(), TIMEOUT + 0.5)
    assert ps.worker_state("ghost") is None
    assert ps.take_forgotten() == ["ghost"] and ps.take_forgotten() == []
    assert ps.forgotten_total == 1


def test_a_heartbeat_keeps_a_slow_first_gradient_joining() -> None:
    ps = make_server()
    ps.handle(Join("slow", 5, nonce=3), 0.0)
    ps.handle(Heartbeat("slow", 0, session=5), TIMEOUT - 1)
    ps.handle(Tick(), TIMEOUT + 0.5)
    assert joining(ps, "slow") and ps.worker_state("slow") is WorkerState.LIVE


def test_a_joining_worker_that_leaves_is_dead_and_left_no_barrier() -> None:
    ps = make_server()
    ps.handle(Join("brief", 5, nonce=3), 0.0)
    assert ps.handle(Leave("brief", "last_will", nonce=3), 1.0) == [
        WorkerLeft("brief", "last_will")]  # fmt: skip
    assert ps.worker_state("brief") is WorkerState.DEAD and ps.view.n_live == 0


def test_joining_ids_are_capped_and_the_oldest_evicted() -> None:
    ps = make_server(max_joining=8)
    for i in range(5000):
        ps.handle(Join(f"f{i}", i + 1, nonce=1), 0.001 * i)
    known = [f"f{i}" for i in range(5000) if ps.worker_state(f"f{i}") is not None]
    assert known == [f"f{i}" for i in range(4992, 5000)]
    assert ps.forgotten_total == 4992


def test_records_are_capped_by_evicting_the_longest_dead() -> None:
    # Prepare: three workers pushed and left, in this order: d1, d2, d3
    ps = make_server(max_records=4)
    for i, wid in enumerate(("d1", "d2", "d3")):
        w = Honest(ps, wid, 0.0)
        w.push(0.1)
        ps.handle(Leave(wid, "bye", nonce=1), 1.0 + i)
    live = Honest(ps, "live", 5.0)
    live.push(5.1)
    # Execute: a newcomer needs a record
    Honest(ps, "new", 6.0)
    # Assert: the longest dead gave its record up; live and newer dead stay
    assert ps.worker_state("d1") is None
    assert ps.worker_state("d2") is WorkerState.DEAD
    assert ps.worker_state("live") is WorkerState.LIVE
    assert len(ps.stats()) == 4


def test_a_hello_that_finds_only_live_workers_is_refused() -> None:
    ps = make_server(max_records=2)
    for wid in ("a", "b"):
        Honest(ps, wid, 0.0).push(0.1)
    acts = ps.handle(Join("c", 9, nonce=1), 1.0)
    assert acts == [Rejected("c", 0, "admission_full")]
    assert ps.rejected_unregistered == {"admission_full": 1}


def test_another_process_cannot_take_a_joining_id_that_proved_its_session() -> None:
    ps = make_server()
    ps.handle(Join("pi", 5, instance=1, nonce=3), 0.0)
    ps.handle(Heartbeat("pi", 0, session=5), 0.5)
    refused = ps.handle(Join("pi", 6, instance=2, nonce=4), 1.0)
    taken = ps.handle(Join("pi", 7, instance=2, nonce=4), TIMEOUT + 2)
    assert refused == [Rejected("pi", 0, "duplicate_id")]
    assert released(taken, "pi") is not None


@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_admission_limits_are_checked(value: object) -> None:
    with pytest.raises(ValueError):
        Admission(max_joining=value)  # type: ignore[arg-type]
