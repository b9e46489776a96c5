"""K-of-N synchronization: a round closes when the first K live workers pushed."""

from __future__ import annotations

import math

from edgeps.core.policy_api import Policy
from edgeps.core.types import Push
from edgeps.core.view import ClusterView


class KofN(Policy):
    """K-of-N rounds with backup workers or a monitor-chosen K.

    Fixed K follows the backup-worker scheme of Chen et al., "Revisiting
    Distributed Synchronous SGD" (2016): of N live workers, a round is released
    as soon as the first K have pushed for it; the other N - K are not waited
    for. Two differences from the paper: the core applies each push as it
    arrives instead of averaging the K gradients into one step, and late pushes
    are kept up to ``cap`` rounds (cap=0 drops them all, as the paper does;
    the default 1 keeps the work of a worker that just missed a round). ``k="auto"``
    ("kofn:auto") is our reading of limited synchronous parallel: K is the
    number of live workers the PS still expects on time, at least 1: those the
    monitor classes as persistently slow are not waited for, nor is a worker
    whose current iteration has already run far past its own typical time (a
    transient disturbance, seen while it happens). Re-evaluated at every event.

    Rounds: the PS collects round R. A worker released while R is collected is
    assigned round R; its push for R counts towards closing R. When K_eff =
    min(K, live) pushes for R are in, R closes and every waiting worker is
    released into round R + 1. A left-behind worker's push arrives with lag =
    R - assigned round > 0: within ``cap`` it is applied (it does not count
    for R) and the worker is released at once; beyond ``cap`` it is dropped as
    "too_stale" and the worker is resynced with the current parameters. Bound:
    every applied push lags the current round by at most ``cap`` rounds.

    Per-worker state kept here, not in the core's record: each worker's
    assigned round and whether it pushed for the current one. Rounds exist only
    under this policy, and both are dropped when the worker leaves.
    """

    name = "kofn"

    def __init__(self, k: int | str = "auto", *, cap: int = 1) -> None:
        if k != "auto" and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"K-of-N k must be an int >= 1 or 'auto', got {k!r}")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
            raise ValueError(f"K-of-N cap must be an int >= 0, got {cap!r}")
        self.k = k
        self.cap = cap
        self.round = 1
        self.max_applied_lag = 0
        self._assigned: dict[str, int] = {}
        self._pushed: set[str] = set()
        self._slow_cache: tuple[int, int, set[str]] | None = None

    @property
    def bound_description(self) -> str:
        return (
            f"an applied push lags the collected round by at most cap = {self.cap} "
            f"rounds; a round closes after K = {self.k} of the live workers pushed"
        )

    @property
    def bound(self) -> float:
        return float(self.cap)

    def measure(self, view: ClusterView) -> float:
        return float(self.max_applied_lag)

    def k_effective(self, view: ClusterView, now: float | None = None) -> int:
        """The K used for the round being collected (1 <= K <= live workers).

        Under "auto": the live workers minus those the monitor finds persistently
        slow, minus (when ``now`` is known) those still computing this round
        whose iteration has already run far past their own typical time.
        """
        live = view.live_ids()
        if self.k != "auto":
            assert isinstance(self.k, int)
            return max(1, min(self.k, len(live)))
        key = (view.monitor.generation, view.membership)
        if self._slow_cache is None or self._slow_cache[:2] != key:
            self._slow_cache = (*key, view.monitor.persistent_ids(live))
        slow = self._slow_cache[2]
        overdue = 0
        if now is not None:
            for w in live:
                if (
                    w not in self._pushed
                    and w not in slow
                    and not view.is_waiting(w)
                    and self.lag(w) == 0
                    and view.monitor.overdue(w, now - view.released_at(w))
                ):
                    overdue += 1
        return max(1, min(len(live) - len(slow) - overdue, len(live)))

    def lag(self, worker_id: str) -> int:
        """Rounds closed since this worker was released (0: in the current one)."""
        return self.round - self._assigned.get(worker_id, self.round)

    def admit(self, view: ClusterView, push: Push, now: float) -> str | None:
        return "too_stale" if self.lag(push.worker_id) > self.cap else None

    def on_applied(self, view: ClusterView, push: Push, now: float) -> None:
        lag = self.lag(push.worker_id)
        self.max_applied_lag = max(self.max_applied_lag, lag)
        if lag == 0:
            self._pushed.add(push.worker_id)
        # the round closes in refresh(), which the core calls right after

    def _close_round(self, view: ClusterView, now: float) -> None:
        if not self._pushed:
            return
        count = sum(1 for w in self._pushed if view.is_live(w))
        if count >= self.k_effective(view, now):
            self.round += 1
            self._pushed.clear()

    def refresh(self, view: ClusterView, now: float) -> None:
        # a push, a leave or a change of K under "auto" can complete the round
        self._close_round(view, now)

    # lag > 0  <=>  assigned round <= round - 1 (a worker without one never lags)
    keyed_release = True

    def release_key(self, view: ClusterView, worker_id: str) -> float:
        return float(self._assigned.get(worker_id, math.inf))

    def release_limit(self, view: ClusterView, now: float) -> float:
        return float(self.round - 1)

    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        return self.lag(worker_id) > 0

    def on_released(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._assigned[worker_id] = self.round

    def on_left(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._assigned.pop(worker_id, None)
        self._pushed.discard(worker_id)

    def describe(self) -> str:
        k = "auto" if self.k == "auto" else f"k={self.k}"
        return f"kofn:{k},cap={self.cap}"
