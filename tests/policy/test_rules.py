"""Each policy's rule on crafted event sequences, and parse_policy."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import ParameterServer, Policy
from edgeps.core.types import Applied, Held, Join, Leave, Push, Rejected, Release, Tick
from edgeps.policy import POLICIES, parse_policy
from edgeps.policy.dssp import DSSP
from edgeps.policy.kofn import KofN

N = 2


class Board:
    """A worker that pushes a unit gradient on the version it was released with."""

    def __init__(self, ps: ParameterServer, wid: str, now: float = 0.0) -> None:
        self.ps, self.wid, self.clock, self.seq = ps, wid, 0, -1
        self.base = self._released(ps.handle(Join(wid), now))

    def _released(self, actions: list) -> int | None:
        for a in actions:
            if isinstance(a, Release) and self.wid in a.worker_ids:
                return int(a.version)
        return None

    def push(self, now: float) -> list:
        assert self.base is not None, f"{self.wid} pushed without being released"
        self.clock += 1
        self.seq += 1
        p = Push(self.wid, self.clock, self.seq, self.base, np.ones(N, np.float32))
        acts = self.ps.handle(p, now)
        self.base = self._released(acts)
        return acts

    def note(self, actions: list) -> None:
        """Pick up a release that another worker's event produced."""
        v = self._released(actions)
        if v is not None:
            self.base = v


def server(policy: str | Policy, **kw: object) -> ParameterServer:
    """A server over N zeros; a text form is read here, at the edge."""
    if isinstance(policy, str):
        policy = parse_policy(policy)
    return ParameterServer(np.zeros(N, np.float32), policy=policy, **kw)  # type: ignore[arg-type]


def test_bsp_releases_everyone_only_when_the_last_worker_pushed() -> None:
    ps = server("bsp")
    a, b, c = Board(ps, "a"), Board(ps, "b"), Board(ps, "c")
    ra, rb = a.push(1.0), b.push(2.0)
    rc = c.push(3.0)
    assert isinstance(ra[-1], Held) and isinstance(rb[-1], Held)
    assert rc[-1] == Release(("a", "b", "c"), 3)


def test_asp_never_holds() -> None:
    ps = server("asp")
    a, _ = Board(ps, "a"), Board(ps, "b")
    results = [a.push(float(t))[-1] for t in range(1, 20)]
    assert all(r == Release(("a",), i + 1) for i, r in enumerate(results))


def test_ssp_lets_a_worker_run_s_clocks_ahead_then_holds_it() -> None:
    ps = server("ssp:2")
    a, b = Board(ps, "a"), Board(ps, "b")
    results = [a.push(float(t))[-1] for t in range(1, 4)]
    freed = b.push(4.0)
    assert [type(r) for r in results] == [Release, Release, Held]
    assert freed[-1] == Release(("a", "b"), 4)
    assert ps.view.max_live_clock() - ps.view.min_live_clock() == 2


def test_kofn_closes_a_round_on_the_first_k_pushes() -> None:
    policy = KofN(2, cap=1)
    ps = server(policy)
    a, b, c = Board(ps, "a"), Board(ps, "b"), Board(ps, "c")
    held = a.push(1.0)
    closed = b.push(2.0)
    assert isinstance(held[-1], Held)
    assert closed[-1] == Release(("a", "b"), 2) and policy.round == 2
    # the left-behind worker's push is one round late: applied, released at once
    late = c.push(3.0)
    assert late[-1] == Release(("c",), 3) and policy.max_applied_lag == 1


def test_kofn_drops_pushes_beyond_the_cap_and_resyncs_the_worker() -> None:
    policy = KofN(2, cap=0)
    ps = server(policy)
    a, b, c = Board(ps, "a"), Board(ps, "b"), Board(ps, "c")
    a.push(1.0)
    a.note(b.push(2.0))
    acts = c.push(3.0)
    assert acts == [Rejected("c", 0, "too_stale"), Release(("c",), 2)]
    assert ps.version == 2 and ps.stats()["c"].rejected == {"too_stale": 1}
    # resynced into the current round: its next push counts for it
    a.push(4.0)
    assert c.push(5.0)[-1] == Release(("a", "c"), 4)


def test_kofn_leave_can_complete_the_round() -> None:
    ps = server(KofN(3))
    a, b, _ = Board(ps, "a"), Board(ps, "b"), Board(ps, "c")
    a.push(1.0)
    b.push(2.0)
    acts = ps.handle(Leave("c", "last_will"), 3.0)
    assert acts[-1] == Release(("a", "b"), 2)


def test_kofn_auto_leaves_a_persistent_straggler_out_of_the_barrier() -> None:
    policy = KofN("auto", cap=10)
    ps = server(policy)
    fast = [Board(ps, "a"), Board(ps, "b"), Board(ps, "c")]
    slow = Board(ps, "slow")
    for wid, t in [("a", 1.0), ("b", 1.0), ("c", 1.0), ("slow", 5.0)]:
        for _ in range(4):
            ps.monitor.observe(
                wid, compute_time=t, comm_time=0, iteration_time=t, now=0
            )
    k = policy.k_effective(ps.view)
    fast[0].push(1.0)
    fast[1].push(1.1)
    acts = fast[2].push(1.2)
    for f in fast:
        f.note(acts)
    assert k == 3 and slow.base == 0
    assert acts[-1] == Release(("a", "b", "c"), 3)


def test_dssp_grants_extra_iterations_that_fill_the_wait_for_the_slowest() -> None:
    policy = DSSP(sl=0, su=3)
    ps = server(policy)
    fast, slow = Board(ps, "fast"), Board(ps, "slow")
    for wid, t in [("fast", 1.0), ("slow", 4.0)]:
        for _ in range(4):
            ps.monitor.observe(
                wid, compute_time=t, comm_time=0, iteration_time=t, now=0
            )
    kinds = [type(fast.push(float(t))[-1]) for t in range(1, 5)]
    freed = slow.push(4.0)
    assert kinds == [Release, Release, Release, Held]
    assert policy.credits_granted == 1 and "fast" in freed[-1].worker_ids


def test_dssp_without_timing_data_is_ssp_at_the_lower_threshold() -> None:
    policy = DSSP(sl=1, su=5)
    ps = server(policy)
    fast, _ = Board(ps, "fast"), Board(ps, "slow")
    kinds = [type(fast.push(1.0)[-1]), type(fast.push(2.0)[-1])]
    assert kinds == [Release, Held] and policy.credits_granted == 0


@pytest.mark.parametrize(
    "text",
    [
        "bsp",
        "asp",
        "ssp:0",
        "ssp:5",
        "kofn:k=3,cap=0",
        "kofn:auto,cap=2",
        "dssp:sl=1,su=6",
        "dssp:sl=0,su=0",
        "fedavg",
        "fedavg:k=3,deadline=1.5",
        "fedbuff:k=4",
        "fedasync:a=0.5",
    ],  # fmt: skip
)
def test_policy_text_round_trips(text: str) -> None:
    policy = parse_policy(text)
    again = parse_policy(policy.describe())
    assert again.describe() == policy.describe()
    assert policy.name in POLICIES and policy.bound_description


@pytest.mark.parametrize(
    "text",
    [
        "",
        "bspp",
        "ssp:x",
        "ssp:-1",
        "asp:1",
        "kofn",
        "kofn:k=0",
        "kofn:k=2,cap=-1",
        "kofn:k=2,k=3",
        "kofn:j=2",
        "dssp:sl=3,su=1",
        "dssp:sl=1,sx=2",
        "ssp:",
        "dssp:sl",
    ],  # fmt: skip
)
def test_bad_policy_text_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_policy(text)


def test_non_text_policy_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_policy(3)  # type: ignore[arg-type]


def test_kofn_auto_stops_waiting_for_a_worker_far_past_its_typical_time() -> None:
    policy = KofN("auto")
    ps = server(policy)
    a, b, _ = Board(ps, "a"), Board(ps, "b"), Board(ps, "c")
    for wid in "abc":
        for _ in range(4):
            ps.monitor.observe(
                wid, compute_time=1, comm_time=0, iteration_time=1, now=0
            )
    a.push(1.0)
    b.push(1.0)
    on_time = ps.handle(Tick(), 1.2)
    late = ps.handle(Tick(), 2.0)
    assert on_time == [] and policy.k_effective(ps.view, 1.2) == 3
    assert late == [Release(("a", "b"), 2)]


@pytest.mark.parametrize("cap", [0, 1, 2, 3])
def test_kofn_cap_boundary_applies_lag_cap_and_drops_lag_cap_plus_one(cap: int) -> None:
    # Prepare: with K = 1 every push of the fast worker closes a round
    for lag, expected in ((cap, Applied), (cap + 1, Rejected)):
        policy = KofN(1, cap=cap)
        ps = server(policy)
        fast, slow = Board(ps, "fast"), Board(ps, "slow")
        for t in range(lag):
            fast.push(float(t + 1))
        # Execute
        acts = slow.push(100.0)
        # Assert
        assert isinstance(acts[0], expected), (cap, lag, acts)
        assert policy.max_applied_lag <= cap
