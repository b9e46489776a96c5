"""K-of-N synchronization: a round closes when the first K live workers pushed."""

from __future__ import annotations

import heapq
import math

from edgeps.core.live_times import LiveTimes
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

    Cost per event. "auto" reads the persistently slow from sorted typical
    times (``edgeps.core.live_times``) and finds the overdue among the workers
    whose deadline (release + the monitor's overdue time) has passed, taken
    from a heap of deadlines: O(log N) plus the overdue ones, not a scan of
    every live worker.
    """

    name = "kofn"
    waits_for_rounds = True

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
        self._times: LiveTimes | None = None  # "auto": sorted live typical times
        # "auto": (deadline, release token, worker) of the workers computing in
        # the current round, and those whose deadline passed (may be overdue)
        self._deadlines: list[tuple[float, int, str]] = []
        self._token: dict[str, int] = {}
        self._tokens = 0
        self._late: set[str] = set()

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
        n_live = view.n_live
        if self.k != "auto":
            assert isinstance(self.k, int)
            return max(1, min(self.k, n_live))
        times = self._live_times(view)
        if times.sync(view):
            self._all_deadlines(view)
        overdue = 0 if now is None else self._overdue(view, times, now)
        return max(1, min(n_live - times.n_slow() - overdue, n_live))

    def _live_times(self, view: ClusterView) -> LiveTimes:
        if self._times is None or self._times.monitor is not view.monitor:
            self._times = LiveTimes(view.monitor)
        return self._times

    def _all_deadlines(self, view: ClusterView) -> None:
        """The monitor was fed from outside: every deadline may have moved."""
        self._deadlines = []
        for w in view.live_ids():
            if self.lag(w) == 0 and not view.is_waiting(w) and w in self._token:
                self._push_deadline(view, w)

    def _push_deadline(self, view: ClusterView, w: str) -> None:
        deadline = view.released_at(w) + view.monitor.overdue_after(w)
        if deadline < math.inf:
            heapq.heappush(self._deadlines, (deadline, self._token[w], w))

    def _overdue(self, view: ClusterView, times: LiveTimes, now: float) -> int:
        """Live workers computing this round, not slow, past their own norm."""
        heap, late = self._deadlines, self._late
        margin = 1e-9 * (1.0 + abs(now))  # the exact test below decides
        while heap and heap[0][0] <= now + margin:
            _, token, w = heapq.heappop(heap)
            if self._token.get(w) == token and self._assigned.get(w) == self.round:
                late.add(w)
        count = 0
        for w in list(late):
            if (
                w in self._pushed
                or not view.is_live(w)
                or view.is_waiting(w)
                or self.lag(w) != 0
            ):
                late.discard(w)  # only a new release makes it a candidate again
            elif not times.is_slow(w) and view.monitor.overdue(
                w, now - view.released_at(w)
            ):
                count += 1
        return count

    def lag(self, worker_id: str) -> int:
        """Rounds closed since this worker was released (0: in the current one)."""
        return self.round - self._assigned.get(worker_id, self.round)

    def admit(self, view: ClusterView, push: Push, now: float) -> str | None:
        return "too_stale" if self.lag(push.worker_id) > self.cap else None

    def on_applied(self, view: ClusterView, push: Push, now: float) -> None:
        lag = self.lag(push.worker_id)
        self.max_applied_lag = max(self.max_applied_lag, lag)
        times = self._live_times(view) if self.k == "auto" else None
        if times is not None and times.update(view, push.worker_id, True):
            self._all_deadlines(view)
        if lag == 0:
            self._pushed.add(push.worker_id)
        # the round closes in refresh(), which the core calls right after

    def _close_round(self, view: ClusterView, now: float) -> None:
        if not self._pushed:
            return
        # a leaver is taken out of _pushed: every member is live
        if len(self._pushed) >= self.k_effective(view, now):
            self.round += 1
            self._pushed.clear()
            self._late.clear()  # those of the closed round lag now

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
        if self.k != "auto":
            return
        self._tokens += 1
        self._token[worker_id] = self._tokens
        self._late.discard(worker_id)
        self._push_deadline(view, worker_id)
        if len(self._deadlines) > 4 * len(self._assigned) + 64:
            self._deadlines = [
                e for e in self._deadlines if self._token.get(e[2]) == e[1]
            ]
            heapq.heapify(self._deadlines)

    def on_joined(self, view: ClusterView, worker_id: str, now: float) -> None:
        if self.k == "auto" and self._live_times(view).update(view, worker_id, False):
            self._all_deadlines(view)

    def on_left(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._assigned.pop(worker_id, None)
        self._pushed.discard(worker_id)
        self._token.pop(worker_id, None)
        self._late.discard(worker_id)
        if self.k == "auto" and self._live_times(view).update(view, worker_id, False):
            self._all_deadlines(view)

    def describe(self) -> str:
        k = "auto" if self.k == "auto" else f"k={self.k}"
        return f"kofn:{k},cap={self.cap}"
