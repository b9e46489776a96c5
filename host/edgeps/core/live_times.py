"""Typical iteration times of the live workers, sorted, so a policy reads the
cluster median and the persistently slow in O(log N) per event instead of
scanning every worker (``PerformanceMonitor.cluster_median`` and
``persistent_ids`` over the live ids give the same answers).

The owner calls ``update(view, worker_id, observed)`` after each applied push
of a worker (``observed``: the core has just fed the monitor one sample of
it) and when a worker joined or left. Samples fed to the monitor by anyone
else show as an unexpected ``generation``: then every live worker is read
again, so the answers always follow the monitor's current values.
"""

from __future__ import annotations

import bisect
import math

from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.view import ClusterView


class LiveTimes:
    """Sorted typical times of the live workers the owner tells it about."""

    def __init__(self, monitor: PerformanceMonitor) -> None:
        self.monitor = monitor
        self._mean: dict[str, float] = {}  # live, at least one sample
        self._all: list[float] = []  # sorted values of _mean
        self._warm: dict[str, float] = {}  # live, past the monitor's warmup
        self._warm_sorted: list[float] = []
        self._seen = -1  # the monitor generation these values follow

    def update(self, view: ClusterView, worker_id: str, observed: bool) -> bool:
        """``worker_id`` was applied (``observed``), joined or left; True if
        every live worker had to be read again."""
        if self.monitor.generation != self._seen + observed:
            return self.sync(view)
        self._put(worker_id, view.is_live(worker_id))
        self._seen = self.monitor.generation
        return False

    def sync(self, view: ClusterView) -> bool:
        """Read every live worker again if the monitor moved behind our back."""
        if self.monitor.generation == self._seen:
            return False
        self._mean.clear()
        self._warm.clear()
        self._all.clear()
        self._warm_sorted.clear()
        for w in view.live_ids():
            self._put(w, True)
        self._seen = self.monitor.generation
        return True

    def _put(self, worker_id: str, live: bool) -> None:
        for table, values in ((self._mean, self._all), (self._warm, self._warm_sorted)):
            old = table.pop(worker_id, None)
            if old is not None:
                del values[bisect.bisect_left(values, old)]
        n = self.monitor.samples(worker_id)
        if not live or n < 1:
            return
        mean = self.monitor.typical_iteration(worker_id)
        self._mean[worker_id] = mean
        bisect.insort(self._all, mean)
        if n >= self.monitor.warmup:
            self._warm[worker_id] = mean
            bisect.insort(self._warm_sorted, mean)

    def median(self) -> float:
        """Median typical time of the live workers with a sample (NaN if none)."""
        s, n = self._all, len(self._all)
        if not n:
            return math.nan
        return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2

    def slow_limit(self) -> float:
        """Typical time above which a warmed-up worker is persistently slow."""
        median = self.median()
        if math.isnan(median) or median <= 0:
            return math.inf
        return self.monitor.slow_factor * median

    def n_slow(self) -> int:
        s = self._warm_sorted
        return len(s) - bisect.bisect_right(s, self.slow_limit())

    def is_slow(self, worker_id: str) -> bool:
        mean = self._warm.get(worker_id)
        return mean is not None and mean > self.slow_limit()
