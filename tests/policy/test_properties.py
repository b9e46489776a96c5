"""Property tests: random interleavings of pushes, joins, leaves, ticks and replays
drive the real ParameterServer; every policy's invariants hold after every event."""

from __future__ import annotations

from dataclasses import dataclass, field

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
from edgeps.policy import parse_policy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

N_PARAMS = 4
TIMEOUT = 5.0
POLICY_TEXTS = [
    "bsp",
    "asp",
    "ssp:0",
    "ssp:2",
    "kofn:k=2",
    "kofn:k=3,cap=0",
    "kofn:auto",
    "dssp:sl=1,su=3",
    "dssp:sl=0,su=2",
    "dsp",
    "fedavg",
    "fedavg:k=2,deadline=1",
    "fedbuff:k=2",
    "fedasync:a=0.5",
]
KINDS = [
    "push",
    "push",
    "push",
    "dup",
    "old",
    "nan",
    "leave",
    "join",
    "restart",
    "beat",
]
KINDS += ["tick"]
# clock-gap rules: a worker may go on after a push only while clock - min <= gap
RELEASE_GAP = {
    "bsp": 0,
    "ssp:0": 0,
    "ssp:2": 2,
    "dssp:sl=1,su=3": 3,
    "dssp:sl=0,su=2": 2,
}


@dataclass
class ModelWorker:
    """What a well-behaved worker knows about itself."""

    wid: str
    incarnation: int = 0
    seq: int = -1
    clock: int = 0
    base_version: int = 0
    state: str = "dead"  # dead (not joined) | computing | pushed | waiting
    sent: list[Push] = field(default_factory=list)


class Cluster:
    """Small model of N workers driving the server and checking every answer."""

    def __init__(self, policy_text: str, n: int, seed: int) -> None:
        self.policy = parse_policy(policy_text)
        self.text = policy_text
        self.aggregates = self.policy.aggregates
        self.server = ParameterServer(
            np.zeros(N_PARAMS, np.float32),
            policy=self.policy,
            lr=0.01,
            staleness_aware=True,
            liveness_timeout=TIMEOUT,
        )
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.applied: set[tuple[str, int, int]] = set()
        self.n_applied = 0
        self.workers = [ModelWorker(f"w{i}") for i in range(n)]
        for w in self.workers:
            self.run(self.server.handle(Join(w.wid, w.incarnation), self.now), own=w)

    def by_id(self, wid: str) -> ModelWorker:
        return next(w for w in self.workers if w.wid == wid)

    def push(self, w: ModelWorker, dt: float, bad: bool = False) -> None:
        self.now += dt
        w.seq += 1
        w.clock += 1
        update = self.rng.normal(size=N_PARAMS).astype(np.float32)
        if bad:
            update[0] = np.nan
        p = Push(
            w.wid, w.clock, w.seq, w.base_version, update, 0.8 * dt, 8, w.incarnation
        )
        w.sent.append(p)
        w.state = "pushed"
        self.run(self.server.handle(p, self.now), own=w)
        assert w.state in ("waiting", "computing"), "a push got no answer"

    def run(self, actions: list[Action], own: ModelWorker | None = None) -> None:
        """Apply the server's actions to the model, checking each one."""
        resynced = any(isinstance(a, Rejected) for a in actions)
        proceeding: list[str] = []
        for a in actions:
            if isinstance(a, Applied):
                w = self.by_id(a.worker_id)
                key = (a.worker_id, w.incarnation, a.seq)
                assert key not in self.applied, f"applied twice: {key}"
                self.applied.add(key)
                self.n_applied += 1
                if self.aggregates:  # its version counts aggregates, not pushes
                    assert a.version <= self.server.version
                else:
                    assert a.version == self.n_applied
            elif isinstance(a, Held):
                assert self.text != "asp", "ASP must never hold"
                self.by_id(a.worker_id).state = "waiting"
            elif isinstance(a, Release):
                assert a.version == self.server.version
                for wid in a.worker_ids:
                    w = self.by_id(wid)
                    # one release per push: only a waiting worker, or the one
                    # that just joined / pushed, is ever released
                    assert w.state in ("waiting", "pushed") or w is own, (wid, w.state)
                    if w.state == "waiting" or (w.state == "pushed" and not resynced):
                        proceeding.append(wid)
                    w.state = "computing"
                    w.base_version = a.version
            elif isinstance(a, WorkerLeft):
                self.by_id(a.worker_id).state = "dead"
            else:
                assert isinstance(a, Rejected)
        gap = RELEASE_GAP.get(self.text)
        view = self.server.view
        for wid in proceeding if gap is not None else []:
            assert view.clock(wid) - view.min_live_clock() <= gap, (self.text, wid)
        self.check()

    def check(self) -> None:
        view = self.server.view
        live = view.live_ids()
        for w in self.workers:
            if w.wid in live:
                assert w.state in ("waiting", "computing", "pushed")
                assert view.is_waiting(w.wid) == (w.state == "waiting")
            else:
                assert w.state == "dead"
        if self.aggregates:
            assert self.server.version <= self.n_applied
        else:
            assert self.server.version == self.n_applied
        if self.policy.bound is not None:
            assert self.policy.measure(view) <= self.policy.bound, self.text
        if self.text in ("bsp", "ssp:0"):
            assert view.max_live_clock() - view.min_live_clock() <= 1
        if live:
            assert not all(view.is_waiting(w) for w in live), "deadlock"
        assert self.server.forced_releases == 0

    def step(self, kind: str, i: int, dt: float) -> None:
        w = self.workers[i % len(self.workers)]
        if kind in ("push", "nan") and w.state == "computing":
            self.push(w, dt, bad=kind == "nan")
        elif kind == "dup" and w.sent:
            self.now += dt
            self.run(self.server.handle(w.sent[-1], self.now))
        elif kind == "old" and len(w.sent) > 1:
            self.now += dt
            acts = self.server.handle(w.sent[0], self.now)
            assert acts and all(isinstance(a, Rejected) for a in acts)
            self.run(acts)
        elif kind == "leave" and w.state != "dead":
            self.run(self.server.handle(Leave(w.wid, "bye"), self.now))
            assert w.state == "dead"
        elif kind == "restart" or (kind == "join" and w.state == "dead"):
            if kind == "restart":
                # a new process: its old link's last will fires, then a fresh
                # session with fresh seq and clock on the worker
                if w.state != "dead":
                    self.run(self.server.handle(Leave(w.wid, "last_will"), self.now))
                w.incarnation += 1
                w.seq, w.clock, w.sent = -1, 0, []
            # a hello after death keeps the incarnation, so its seq goes on
            w.state = "dead"
            acts = self.server.handle(Join(w.wid, w.incarnation), self.now)
            rel = [a for a in acts if isinstance(a, Release) and w.wid in a.worker_ids]
            assert rel and rel[0].version == self.server.version
            self.run(acts, own=w)
        elif kind == "beat" and w.state != "dead":
            self.run(self.server.handle(Heartbeat(w.wid), self.now))
        elif kind == "tick":
            self.now += dt * TIMEOUT
            self.run(self.server.handle(Tick(), self.now))

    def finish(self) -> None:
        """Everyone computing goes silent: past the timeout, nobody stays blocked."""
        silent = [w for w in self.workers if w.state == "computing"]
        was_waiting = [w for w in self.workers if w.state == "waiting"]
        self.now += 2 * TIMEOUT + 1
        self.run(self.server.handle(Tick(), self.now))
        assert all(w.state == "dead" for w in silent)
        if was_waiting:
            assert any(w.state == "computing" for w in was_waiting)


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(KINDS), st.integers(0, 7), st.floats(0.01, 2.0, allow_nan=False)
    ),
    max_size=60,
)


@pytest.mark.parametrize("policy_text", POLICY_TEXTS)
@settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(n=st.integers(1, 5), seed=st.integers(0, 2**16), events=EVENTS)
def test_policy_invariants_hold_under_random_event_orders(
    policy_text: str, n: int, seed: int, events: list[tuple[str, int, float]]
) -> None:
    # Prepare
    cluster = Cluster(policy_text, n, seed)
    # Execute (every step checks the invariants after the server answers)
    for kind, i, dt in events:
        cluster.step(kind, i, dt)
    cluster.finish()
    # Assert
    if cluster.aggregates:
        assert len(cluster.applied) >= cluster.server.version
    else:
        assert len(cluster.applied) == cluster.server.version


@pytest.mark.parametrize("policy_text", POLICY_TEXTS)
@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**16),
    speeds=st.lists(st.floats(0.1, 3.0), min_size=2, max_size=5),
    rounds=st.integers(5, 40),
)
def test_workers_with_fixed_speeds_keep_the_bound_and_make_progress(
    policy_text: str, seed: int, speeds: list[float], rounds: int
) -> None:
    # Prepare: each worker takes its own fixed time per iteration
    cluster = Cluster(policy_text, len(speeds), seed)
    due = {w.wid: s for w, s in zip(cluster.workers, speeds, strict=True)}
    # Execute: always deliver the earliest pending push
    for _ in range(rounds * len(speeds)):
        ready = [w for w in cluster.workers if w.state == "computing"]
        assert ready, "no worker can compute: the barrier is stuck"
        w = min(ready, key=lambda w: due[w.wid])
        dt = max(0.0, due[w.wid] - cluster.now)
        i = cluster.workers.index(w)
        cluster.push(w, dt)
        due[w.wid] = cluster.now + speeds[i]
        for other in cluster.workers:
            if other.state == "computing" and due[other.wid] < cluster.now:
                due[other.wid] = cluster.now + speeds[cluster.workers.index(other)]
    # Assert
    assert cluster.server.version >= rounds
