"""When the slowest live workers push next, without a scan of the slowest group.

DSSP asks, each time a push takes a worker past s_L, for the latest
predicted push among the live workers at the smallest clock (release time
plus typical iteration, ``ClusterView.predicted_push_at``): none if one of
them waits (inf) or is not yet measured (NaN). A computing worker's
prediction is fixed from its release to its push, so it is recorded once,
at the release, in a max-heap per clock; the counts of recorded and of
unmeasured workers per clock tell whether every member is computing and
measured. Each event then costs O(log N) instead of one look per member.
"""

from __future__ import annotations

import heapq
import math

from edgeps.core.view import ClusterView


class SlowestPush:
    """Predicted next push of the computing live workers, grouped by clock."""

    def __init__(self) -> None:
        self._slot: dict[str, tuple[int, float, int]] = {}  # w -> (clock, t, token)
        self._heaps: dict[int, list[tuple[float, int, str]]] = {}  # (-t, token, w)
        self._computing: dict[int, int] = {}  # clock -> recorded workers
        self._unmeasured: dict[int, int] = {}  # clock -> recorded with NaN
        self._tokens = 0
        self._seen = -1  # the monitor generation the records follow

    def released(self, view: ClusterView, wid: str) -> None:
        """``wid`` starts an iteration: record its predicted push."""
        self._sync(view)
        self.forget(wid)
        clock, t = view.clock(wid), view.predicted_push_at(wid)
        self._tokens += 1
        self._slot[wid] = (clock, t, self._tokens)
        self._computing[clock] = self._computing.get(clock, 0) + 1
        if math.isnan(t):
            self._unmeasured[clock] = self._unmeasured.get(clock, 0) + 1
        else:
            heap = self._heaps.setdefault(clock, [])
            heapq.heappush(heap, (-t, self._tokens, wid))

    def forget(self, wid: str) -> None:
        """``wid`` pushed, left or is released again: its record goes."""
        slot = self._slot.pop(wid, None)
        if slot is None:
            return
        clock, t, _ = slot
        self._computing[clock] -= 1
        if math.isnan(t):
            self._unmeasured[clock] -= 1
        if not self._computing[clock]:
            del self._computing[clock]
            self._unmeasured.pop(clock, None)
            self._heaps.pop(clock, None)

    def applied(self, view: ClusterView, wid: str) -> None:
        """``wid``'s push was applied (the monitor got one sample of it)."""
        self.forget(wid)
        self._sync(view, observed=True)

    def latest_at(self, view: ClusterView, clock: int) -> float:
        """max predicted push over the live workers at ``clock``: inf if one
        waits, NaN if one is unmeasured (and none waits), -inf if none."""
        self._sync(view)
        members = view.n_at_clock(clock)
        if self._computing.get(clock, 0) != members:
            return math.inf  # one of them waits at the barrier
        if self._unmeasured.get(clock, 0):
            return math.nan
        heap = self._heaps.get(clock)
        while heap:
            neg, token, w = heap[0]
            slot = self._slot.get(w)
            if slot is not None and slot[2] == token:
                return -neg
            heapq.heappop(heap)
        return -math.inf

    def _sync(self, view: ClusterView, observed: bool = False) -> None:
        """Record everyone again if the monitor was fed by anyone but the core."""
        generation = view.monitor.generation
        if generation == self._seen + observed:
            self._seen = generation
            return
        self._seen = generation
        for w in list(self._slot):
            self.forget(w)
        for w in view.live_ids():
            if not view.is_waiting(w):
                self.released(view, w)
