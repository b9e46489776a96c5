"""DSP under random event orders: its bound holds, dead workers never block,
nothing is applied twice, and the policy never needs the core's safety net.

The bound and the release rule are checked on progress recomputed from the
event log (``dsp_oracle``), not on the policy's own ``measure()``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.types import (
    Action,
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
)
from edgeps.policy.dsp import DSP
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.helpers.dsp_oracle import ProgressOracle

N_PARAMS = 4
TIMEOUT = 3.0
KINDS = ["push"] * 6 + ["dup", "leave", "restart", "rehello", "beat", "tick", "nap"]


@dataclass
class BoardModel:
    """What a well-behaved board knows about itself."""

    wid: str
    incarnation: int = 0
    seq: int = 0
    clock: int = 0
    base_version: int = 0
    state: str = "computing"  # computing | waiting | dead
    last: Push | None = None


class DspHarness:
    """Drives a real ParameterServer with DSP and checks every answer."""

    def __init__(self, policy: DSP, n: int) -> None:
        self.policy = policy
        self.server = ParameterServer(
            np.zeros(N_PARAMS, np.float32),
            policy=policy,
            lr=0.01,
            liveness_timeout=TIMEOUT,
        )
        self.now = 0.0
        self.oracle = ProgressOracle(
            self.server.monitor, policy.w, policy.grace, policy.spike
        )
        self.applied: set[tuple[str, int, int]] = set()
        self.n_applied = 0
        self.boards = {f"w{i}": BoardModel(f"w{i}") for i in range(n)}
        for b in self.boards.values():
            self.join(b)

    def join(self, b: BoardModel) -> None:
        """A new life of the board (a repeated hello of a live one is not)."""
        self.oracle.joined(b.wid, self.now)
        self.carry_out(self.server.handle(Join(b.wid, b.incarnation), self.now))

    def carry_out(
        self, actions: list[Action], pusher: BoardModel | None = None
    ) -> None:
        for act in actions:
            if isinstance(act, Release):
                # the release rule: P_i <= min_j (P_j + credit_j) + w
                assert self.oracle.released(act.worker_ids, self.now) == []
                for wid in act.worker_ids:
                    b = self.boards[wid]
                    b.state, b.base_version = "computing", act.version
            elif isinstance(act, Held):
                self.boards[act.worker_id].state = "waiting"
            elif isinstance(act, Applied):
                assert pusher is not None and pusher.last is not None
                key = (pusher.wid, pusher.incarnation, pusher.last.seq)
                assert key not in self.applied, f"applied twice: {key}"
                self.applied.add(key)
                self.n_applied += 1
                self.oracle.applied(pusher.wid, self.now)
            elif isinstance(act, WorkerLeft):
                self.boards[act.worker_id].state = "dead"
                self.oracle.left(act.worker_id)
            else:
                assert isinstance(act, Rejected)
        self.check()

    def check(self) -> None:
        view = self.server.view
        assert self.oracle.spread() <= self.policy.bound + 1e-9
        assert set(self.oracle.progress) == set(view.live_ids())
        for wid, p in self.oracle.progress.items():
            assert self.policy.progress(wid) == pytest.approx(p, abs=1e-9)
        assert self.server.version == self.n_applied
        assert self.server.forced_releases == 0
        live = view.live_ids()
        if live:
            # someone can always make progress: DSP never holds every live board
            assert not all(view.is_waiting(w) for w in live)
        for wid in live:
            b = self.boards[wid]
            assert b.state != "dead"
            assert view.is_waiting(wid) == (b.state == "waiting")

    def push(self, b: BoardModel) -> None:
        b.seq += 1
        b.clock += 1
        b.last = Push(
            worker_id=b.wid,
            clock=b.clock,
            seq=b.seq,
            base_version=b.base_version,
            update=np.full(N_PARAMS, 0.5, np.float32),
            compute_time=0.01,
            session=b.incarnation,
        )
        self.carry_out(self.server.handle(b.last, self.now), pusher=b)

    def step(self, kind: str, b: BoardModel, dt: float) -> None:
        self.now += dt
        if kind == "push" and b.state == "computing":
            self.push(b)
        elif kind == "dup" and b.last is not None:
            before = self.n_applied
            self.carry_out(self.server.handle(b.last, self.now), pusher=b)
            assert self.n_applied == before  # a replay is never applied
        elif kind == "leave" and b.state != "dead":
            self.carry_out(self.server.handle(Leave(b.wid, "bye"), self.now))
            b.state = "dead"
        elif kind == "restart":
            # a new process: its old link's last will fires first
            self.carry_out(self.server.handle(Leave(b.wid, "last_will"), self.now))
            b.incarnation += 1
            b.seq = b.clock = 0
            b.last = None
            self.join(b)
            # a (re)joining board gets the current parameters at once
            assert b.state == "computing"
            assert b.base_version == self.server.version
        elif kind == "rehello" and b.state != "dead":
            self.carry_out(self.server.handle(Join(b.wid, b.incarnation), self.now))
        elif kind == "beat":
            self.carry_out(self.server.handle(Heartbeat(b.wid), self.now))
        elif kind == "nap":
            self.now += TIMEOUT  # long silence: computing boards time out
            self.carry_out(self.server.handle(Tick(), self.now))
        else:
            self.carry_out(self.server.handle(Tick(), self.now))


ops = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.integers(0, 4),
        st.sampled_from([0.0, 0.01, 0.05, 0.1, 0.3, 0.8, 2.0]),
    ),
    min_size=1,
    max_size=120,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(2, 5),
    w=st.sampled_from([0.0, 0.5, 1.0, 2.0, 4.0]),
    grace=st.sampled_from([0.0, 1.0, 4.0]),
    spike=st.sampled_from([1.0, 2.0, 3.0]),
    rounds=st.sampled_from([(0.0, 1.25, 1.3), (2.0, 1.25, 1.3), (2.0, 100.0, 100.0)]),
    steps=ops,
)
def test_dsp_invariants_hold_for_random_event_orders(
    n: int,
    w: float,
    grace: float,
    spike: float,
    rounds: tuple[float, float, float],
    steps: list[tuple[str, int, float]],
) -> None:
    # Prepare (rounds: from 2 live boards, for speeds within 1.25x or any)
    r, spread, late = rounds
    policy = DSP(w=w, grace=grace, spike=spike, rounds=r, spread=spread, late=late)
    h = DspHarness(policy, n)
    # Execute / Assert: every step is checked inside the harness
    for kind, idx, dt in steps:
        h.step(kind, h.boards[f"w{idx % n}"], dt)
    # Assert: a board that is held is released once the others leave
    for b in h.boards.values():
        if b.state != "dead":
            h.carry_out(h.server.handle(Leave(b.wid, "bye"), h.now))
            b.state = "dead"
    assert h.server.view.n_live == 0


@settings(max_examples=60, deadline=None)
@given(
    speeds=st.lists(st.sampled_from([0.05, 0.1, 0.2, 0.4]), min_size=2, max_size=5),
    w=st.sampled_from([0.5, 1.0, 3.0]),
    rounds=st.sampled_from([0.0, 2.0]),
    order=st.randoms(use_true_random=False),
)
def test_measured_speeds_keep_progress_within_the_bound(
    speeds: list[float], w: float, rounds: float, order: object
) -> None:
    # Prepare: boards of different steady speeds push whenever they are released
    h = DspHarness(DSP(w=w, grace=2.0, rounds=rounds), len(speeds))
    due = {f"w{i}": s for i, s in enumerate(speeds)}
    # Execute: always advance to the next board that is due (ties in random order)
    for _ in range(300):
        ready = [wid for wid, b in h.boards.items() if b.state == "computing"]
        assert ready, "every board was held"
        wid = min(ready, key=lambda x: (due[x], order.random()))  # type: ignore[attr-defined]
        h.now = max(h.now, due[wid])
        h.push(h.boards[wid])
        due[wid] = h.now + speeds[int(wid[1:])]
        for other, b in h.boards.items():
            if b.state == "computing" and due[other] < h.now:
                due[other] = h.now + speeds[int(other[1:])]
    # Assert: progress stays within the bound and fast boards did more pushes
    assert h.oracle.spread() <= h.policy.bound
    counts = {wid: b.clock for wid, b in h.boards.items()}
    fastest = min(range(len(speeds)), key=lambda i: speeds[i])
    slowest = max(range(len(speeds)), key=lambda i: speeds[i])
    if speeds[slowest] >= 2 * speeds[fastest]:
        assert counts[f"w{fastest}"] > counts[f"w{slowest}"]
