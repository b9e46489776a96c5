"""Dynamic Stale Synchronous Parallel: a staleness threshold between s_L and s_U."""

from __future__ import annotations

import math

from edgeps.core.policy_api import Policy
from edgeps.core.types import Push
from edgeps.core.view import ClusterView
from edgeps.policy.dssp_slowest import SlowestPush


class DSSP(Policy):
    """DSSP (Zhao et al., "Dynamic Stale Synchronous Parallel Distributed Training
    for Deep Learning", ICDCS 2019).

    Clocks as in SSP (PS-side count of applied pushes); gap = clock -
    min_live_clock. Rule: a waiting worker with gap <= s_L proceeds (SSP(s_L)).
    When a push takes a worker past s_L for the first time in an episode, the
    PS predicts when the slowest live workers push next (their release time
    plus their typical iteration time from the monitor) and grants the worker
    r* extra iterations, r* in [0, s_U - s_L], chosen so that its own r*-th
    push lands closest to that moment: r* = round((t_slowest - now) / I_w).
    Waiting now would cost t_slowest - now; running r* more iterations turns
    that idle time into work. The worker then proceeds while gap <= s_L + r*;
    the credit ends when its gap falls back to s_L. Without timing data
    r* = 0. Bound: live clocks differ by at most s_U + 1.

    Per-worker state kept here, not in the core's record: the credit r* of a
    worker in an episode, which only this rule grants and reads; it is dropped
    when the episode ends or the worker leaves or rejoins; and each computing
    worker's predicted push, recorded at its release (``dssp_slowest``), so
    finding when the slowest push costs O(log N), not a scan of them.
    """

    name = "dssp"

    def __init__(self, sl: int = 1, su: int = 6) -> None:
        for label, v in (("sl", sl), ("su", su)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"DSSP {label} must be an int >= 0, got {v!r}")
        if sl > su:
            raise ValueError(f"DSSP needs sl <= su, got sl={sl} su={su}")
        self.sl = sl
        self.su = su
        self.credits_granted = 0
        self._credit: dict[str, int] = {}
        self._slowest = SlowestPush()

    @property
    def bound_description(self) -> str:
        return (
            f"max live clock - min live clock <= s_U + 1 = {self.su + 1} "
            f"(s_L + 1 = {self.sl + 1} without credit)"
        )

    @property
    def bound(self) -> float:
        return float(self.su + 1)

    def _gap(self, view: ClusterView, worker_id: str) -> int:
        return view.clock(worker_id) - view.min_live_clock()

    def extra_credit(self, view: ClusterView, worker_id: str, now: float) -> int:
        """r*: extra iterations that fill the time until the slowest workers push."""
        r_max = self.su - self.sl
        if r_max == 0:
            return 0
        # the slowest: the live workers at the smallest clock; one of them
        # waiting (inf) or unmeasured (NaN) means no credit
        t_slow = self._slowest.latest_at(view, view.min_live_clock())
        if not t_slow < math.inf or t_slow == -math.inf:
            return 0
        own = view.monitor.typical_iteration(worker_id)
        if math.isnan(own) or own <= 0 or not math.isfinite(t_slow) or t_slow <= now:
            return 0
        return max(0, min(r_max, round((t_slow - now) / own)))

    def on_applied(self, view: ClusterView, push: Push, now: float) -> None:
        w = push.worker_id
        self._slowest.applied(view, w)
        if self._gap(view, w) <= self.sl:
            self._credit.pop(w, None)
        elif w not in self._credit:
            r = self.extra_credit(view, w, now)
            self._credit[w] = r
            if r:
                self.credits_granted += 1

    # gap <= s_L + credit  <=>  clock - credit <= min live clock + s_L
    keyed_release = True

    def release_key(self, view: ClusterView, worker_id: str) -> float:
        return float(view.clock(worker_id) - self._credit.get(worker_id, 0))

    def release_limit(self, view: ClusterView, now: float) -> float:
        return float(view.min_live_clock() + self.sl)

    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        gap = self._gap(view, worker_id)
        if gap <= self.sl:
            self._credit.pop(worker_id, None)
            return True
        return gap <= self.sl + self._credit.get(worker_id, 0)

    def on_left(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._credit.pop(worker_id, None)
        self._slowest.forget(worker_id)

    def on_released(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._slowest.released(view, worker_id)

    def on_joined(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._credit.pop(worker_id, None)

    def describe(self) -> str:
        return f"dssp:sl={self.sl},su={self.su}"
