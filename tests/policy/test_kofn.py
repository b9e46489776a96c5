"""K-of-N against an independent reference model of its rounds, over random events."""

from __future__ import annotations

import numpy as np
from edgeps.core import ParameterServer
from edgeps.core.types import (
    Applied,
    Held,
    Join,
    Leave,
    Push,
    Rejected,
    Release,
    Tick,
    WorkerLeft,
)
from edgeps.policy.kofn import KofN
from hypothesis import given, settings
from hypothesis import strategies as st

TIMEOUT = 5.0


class RoundModel:
    """The rule written out plainly: rounds, assignments, first-K closing."""

    def __init__(self, k: int, cap: int) -> None:
        self.k, self.cap = k, cap
        self.round = 1
        self.assigned: dict[str, int] = {}
        self.pushed: set[str] = set()
        self.live: set[str] = set()

    def close_if_due(self) -> None:
        if len(self.pushed & self.live) >= max(1, min(self.k, len(self.live))):
            self.round += 1
            self.pushed.clear()


class Run:
    """Drives the server and the model side by side and compares their answers."""

    def __init__(self, k: int, cap: int, n: int) -> None:
        self.ps = ParameterServer(
            np.zeros(2, np.float32), policy=KofN(k, cap=cap), liveness_timeout=TIMEOUT
        )
        self.model = RoundModel(k, cap)
        self.now = 0.0
        self.state: dict[str, str] = {}
        self.seq: dict[str, int] = {}
        self.base: dict[str, int] = {}
        for i in range(n):
            self.join(f"w{i}")

    def join(self, wid: str) -> None:
        self.model.live.add(wid)
        self.model.assigned[wid] = self.model.round
        self.state[wid] = "computing"
        self.seq.setdefault(wid, -1)
        self.apply(self.ps.handle(Join(wid), self.now), expect_released={wid})

    def apply(self, actions: list, expect_released: set[str]) -> None:
        m = self.model
        left = [a.worker_id for a in actions if isinstance(a, WorkerLeft)]
        for wid in left:
            self.state[wid] = "dead"
            m.live.discard(wid)
            m.pushed.discard(wid)
        if left:
            m.close_if_due()
        released: set[str] = set()
        for a in actions:
            if isinstance(a, Release):
                released.update(a.worker_ids)
                for wid in a.worker_ids:
                    self.state[wid] = "computing"
                    self.base[wid] = a.version
            elif isinstance(a, Held):
                self.state[a.worker_id] = "waiting"
        for w in released - expect_released:
            assert m.assigned[w] < m.round, f"{w} released before its round closed"
        for w in released:
            m.assigned[w] = m.round
        held = {w for w, s in self.state.items() if s == "waiting"}
        late = {w for w in held if m.assigned[w] < m.round}
        assert not late, f"held after its round closed: {late}"

    def push(self, wid: str, dt: float) -> None:
        self.now += dt
        self.seq[wid] += 1
        m = self.model
        lag = m.round - m.assigned[wid]
        p = Push(
            wid,
            self.seq[wid] + 1,
            self.seq[wid],
            self.base[wid],
            np.ones(2, np.float32),
        )
        acts = self.ps.handle(p, self.now)
        if lag > m.cap:
            assert isinstance(acts[0], Rejected) and acts[0].reason == "too_stale"
            self.apply(acts, expect_released={wid})
            return
        assert isinstance(acts[0], Applied)
        if lag == 0:
            m.pushed.add(wid)
        m.close_if_due()
        self.state[wid] = "pushed"
        self.apply(acts, expect_released=set())
        assert self.state[wid] in ("waiting", "computing")


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    k=st.integers(1, 4),
    cap=st.integers(0, 2),
    n=st.integers(1, 5),
    events=st.lists(
        st.tuples(
            st.sampled_from(["push"] * 8 + ["leave", "join", "tick"]),
            st.integers(0, 4),
            st.floats(0.01, 1.0),
        ),
        max_size=80,
    ),
)
def test_kofn_matches_the_reference_round_model(
    k: int, cap: int, n: int, events: list[tuple[str, int, float]]
) -> None:
    # Prepare
    run = Run(k, cap, n)
    # Execute / Assert (every step compares server and model)
    for kind, i, dt in events:
        wid = f"w{i % n}"
        s = run.state[wid]
        if kind == "push" and s == "computing":
            run.push(wid, dt)
        elif kind == "leave" and s != "dead":
            run.apply(run.ps.handle(Leave(wid, "bye"), run.now), expect_released=set())
        elif kind == "join" and s == "dead":
            run.join(wid)
        elif kind == "tick":
            run.now += dt * TIMEOUT
            run.apply(run.ps.handle(Tick(), run.now), expect_released=set())
    assert run.ps.policy.round == run.model.round  # type: ignore[attr-defined]
