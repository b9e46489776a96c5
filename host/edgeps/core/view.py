"""The read-only view of the cluster that the PS core gives its sync policy."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping

from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.registry import WorkerRecord


class ClusterView:
    """Read-only view of the live cluster, built by the core over its registry.

    Clocks are PS-side: the number of pushes applied for a worker, offset at
    (re)join to the slowest live worker's clock. Only live workers (``LIVE`` or
    ``SUSPECTED``) count for the barrier; dead ones are invisible here.

    Cost. The aggregates (number of live workers, smallest and largest live
    clock, the live workers at a clock) are kept up to date as the core moves
    a clock or a worker enters or leaves the live set (``note_*``), so reading
    them costs O(1) (amortised O(log N) for min/max), whatever N is. The list
    of live ids is rebuilt only after a membership change.
    """

    def __init__(
        self,
        workers: Mapping[str, WorkerRecord],
        monitor: PerformanceMonitor,
        version_of: Callable[[], int],
    ) -> None:
        self._workers = workers
        self.monitor = monitor
        self._version_of = version_of
        self.floor = 0  # last known minimum live clock, used when nobody is live
        # clock -> live workers at that clock (insertion ordered)
        self._at: dict[int, dict[str, None]] = {}
        self._low: list[int] = []  # min-heap of clocks, entries of empty ones left
        self._high: list[int] = []  # max-heap (negated), likewise
        self._n_live = 0
        self._live_cache: list[str] | None = None
        self.membership = 0  # bumped on every change of the live set

    @property
    def version(self) -> int:
        return self._version_of()

    # ---- what the core tells it -------------------------------------------

    def note_live(self, rec: WorkerRecord) -> None:
        """``rec`` entered the live set with its current clock."""
        self._n_live += 1
        self._add(rec.worker_id, rec.clock)
        self._live_cache = None
        self.membership += 1

    def note_dead(self, rec: WorkerRecord) -> None:
        """``rec`` left the live set (its clock is the one it had while live)."""
        self._n_live -= 1
        self._remove(rec.worker_id, rec.clock)
        self._live_cache = None
        self.membership += 1

    def note_clock(self, rec: WorkerRecord, old: int) -> None:
        """The clock of live ``rec`` moved from ``old`` to ``rec.clock``."""
        self._remove(rec.worker_id, old)
        self._add(rec.worker_id, rec.clock)

    def _add(self, wid: str, clock: int) -> None:
        group = self._at.get(clock)
        if group is None:
            group = self._at[clock] = {}
            heapq.heappush(self._low, clock)
            heapq.heappush(self._high, -clock)
            if len(self._low) + len(self._high) > 4 * len(self._at) + 32:
                self._low = sorted(self._at)
                self._high = sorted(-c for c in self._at)
        group[wid] = None

    def _remove(self, wid: str, clock: int) -> None:
        group = self._at[clock]
        del group[wid]
        if not group:
            del self._at[clock]  # its heap entries are dropped when they surface

    def freeze_clocks(self) -> None:
        """Kept for callers of the former API: the aggregates are always current."""
        return None

    def thaw_clocks(self) -> None:
        return None

    # ---- what policies read -----------------------------------------------

    def live_ids(self) -> list[str]:
        """Live workers in registry order (a new list each call)."""
        if self._live_cache is None:
            self._live_cache = [w for w, r in self._workers.items() if r.live]
        return list(self._live_cache)

    def ids_at_clock(self, clock: int) -> list[str]:
        """The live workers whose clock is ``clock``."""
        return list(self._at.get(clock, ()))

    def n_at_clock(self, clock: int) -> int:
        """How many live workers have clock ``clock``."""
        group = self._at.get(clock)
        return 0 if group is None else len(group)

    @property
    def n_live(self) -> int:
        return self._n_live

    def min_live_clock(self) -> int:
        """Smallest clock among live workers (the last known one if none is live)."""
        low, at = self._low, self._at
        while low and low[0] not in at:
            heapq.heappop(low)
        return low[0] if low else self.floor

    def max_live_clock(self) -> int:
        high, at = self._high, self._at
        while high and -high[0] not in at:
            heapq.heappop(high)
        return -high[0] if high else self.floor

    def is_live(self, worker_id: str) -> bool:
        r = self._workers.get(worker_id)
        return r is not None and r.live

    def clock(self, worker_id: str) -> int:
        return self._workers[worker_id].clock

    def is_waiting(self, worker_id: str) -> bool:
        return self._workers[worker_id].waiting

    def released_at(self, worker_id: str) -> float:
        return self._workers[worker_id].released_at

    def predicted_push_at(self, worker_id: str) -> float:
        """When this worker's next push should arrive (NaN if the monitor lacks data).

        A waiting worker has no next push until released; its prediction is inf.
        """
        r = self._workers[worker_id]
        if r.waiting:
            return math.inf
        typical = self.monitor.typical_iteration(worker_id)
        if math.isnan(typical):
            return math.nan
        return r.released_at + typical
