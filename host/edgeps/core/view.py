"""The read-only view of the cluster that the PS core gives its sync policy."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.registry import WorkerRecord


class ClusterView:
    """Read-only view of the live cluster, built by the core over its registry.

    Clocks are PS-side: the number of pushes applied for a worker, offset at
    (re)join to the slowest live worker's clock. Only live workers (``LIVE`` or
    ``SUSPECTED``) count for the barrier; dead ones are invisible here.
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
        self._cached: tuple[int, int, int] | None = None  # (n_live, min, max)
        self._cached_live: list[str] | None = None
        self.floor = 0  # last known minimum live clock, used when nobody is live

    @property
    def version(self) -> int:
        return self._version_of()

    def freeze_clocks(self) -> None:
        """Cache the live set and its min/max clocks during a release pass."""
        self._cached = None
        self._cached_live = None
        self._cached = self._aggregate()
        self._cached_live = self.live_ids()

    def thaw_clocks(self) -> None:
        self._cached = None
        self._cached_live = None

    def _aggregate(self) -> tuple[int, int, int]:
        if self._cached is not None:
            return self._cached
        clocks = [r.clock for r in self._workers.values() if r.live]
        if not clocks:
            return 0, self.floor, self.floor
        return len(clocks), min(clocks), max(clocks)

    def live_ids(self) -> list[str]:
        if self._cached_live is not None:
            return list(self._cached_live)
        return [w for w, r in self._workers.items() if r.live]

    @property
    def n_live(self) -> int:
        return self._aggregate()[0]

    def min_live_clock(self) -> int:
        """Smallest clock among live workers (the last known one if none is live)."""
        return self._aggregate()[1]

    def max_live_clock(self) -> int:
        return self._aggregate()[2]

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
