"""Stale Synchronous Parallel with a fixed staleness threshold s."""

from __future__ import annotations

from edgeps.core.policy_api import Policy
from edgeps.core.view import ClusterView


class SSP(Policy):
    """Stale Synchronous Parallel (Ho et al., "More Effective Distributed ML via a
    Stale Synchronous Parallel Parameter Server", NIPS 2013).

    Clocks are PS-side counts of applied pushes (a worker's clock is c once its
    c-th push is applied). Rule: a waiting worker with clock c may start
    iteration c+1 iff c - min_live_clock <= s. So SSP(0) is BSP. Bound: the
    worker that proceeds at c = min + s pushes clock min + s + 1, hence live
    clocks never differ by more than s + 1, and an iteration started at clock c
    has seen every update up to clock c - s from every live worker.
    """

    name = "ssp"

    def __init__(self, s: int = 3) -> None:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(f"SSP staleness s must be an int >= 0, got {s!r}")
        self.s = s

    @property
    def bound_description(self) -> str:
        return f"max live clock - min live clock <= s + 1 = {self.s + 1}"

    @property
    def bound(self) -> float:
        return float(self.s + 1)

    keyed_release = True  # key: the clock; limit: the smallest live clock + s

    def release_key(self, view: ClusterView, worker_id: str) -> float:
        return float(view.clock(worker_id))

    def release_limit(self, view: ClusterView, now: float) -> float:
        return float(view.min_live_clock() + self.s)

    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        return view.clock(worker_id) - view.min_live_clock() <= self.s

    def describe(self) -> str:
        return f"ssp:{self.s}"
