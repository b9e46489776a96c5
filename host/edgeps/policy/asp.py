"""Asynchronous Parallel: nobody ever waits."""

from __future__ import annotations

from edgeps.core.policy_api import Policy
from edgeps.core.view import ClusterView


class ASP(Policy):
    """Asynchronous Parallel: never wait (the asynchronous parameter-server SGD
    of Dean et al., "Large Scale Distributed Deep Networks", NIPS 2012).

    Rule: every push is applied and its worker released at once. There is no
    staleness bound; staleness is only observed (``max_staleness_seen``), and
    a staleness-aware step size (lr / (staleness + 1)) is the usual remedy.
    """

    name = "asp"

    @property
    def bound_description(self) -> str:
        return "none (asynchronous: clocks may drift apart without limit)"

    keyed_release = True

    def release_key(self, view: ClusterView, worker_id: str) -> float:
        return 0.0

    def release_limit(self, view: ClusterView, now: float) -> float:
        return 0.0

    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        return True
