"""Bulk Synchronous Parallel: lockstep rounds."""

from __future__ import annotations

from edgeps.core.policy_api import Policy
from edgeps.core.view import ClusterView


class BSP(Policy):
    """Bulk Synchronous Parallel (Valiant, CACM 1990): lockstep rounds.

    Rule: a worker that has pushed clock c proceeds only when every live worker
    has pushed clock c, i.e. when its clock is the minimum live clock. Bound:
    live clocks differ by at most 1. Dead workers leave the barrier.
    """

    name = "bsp"
    waits_for_rounds = True

    @property
    def bound_description(self) -> str:
        return "max live clock - min live clock <= 1 (lockstep)"

    @property
    def bound(self) -> float:
        return 1.0

    keyed_release = True  # key: the clock; limit: the smallest live clock

    def release_key(self, view: ClusterView, worker_id: str) -> float:
        return float(view.clock(worker_id))

    def release_limit(self, view: ClusterView, now: float) -> float:
        return float(view.min_live_clock())

    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        return view.clock(worker_id) <= view.min_live_clock()
