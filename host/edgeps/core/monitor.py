"""Per-worker performance monitor: robust typical times and straggler classes.

Each worker gets an exponentially weighted mean (EWMA) and an exponentially
weighted mean absolute deviation of its compute, communication and iteration
times. A sample far from the worker's own history is an outlier: it enters the
average clipped to the edge of the normal band, so a one-off spike barely moves
the typical time. When ``persistent_window`` outliers in a row fall on the same
side, the worker's level has changed: the typical time jumps to the median of
those samples at once, so a persistent slowdown shows within a few iterations.

Classes: ``"transient"`` (the last iteration was far above the worker's own
history), ``"persistent"`` (its typical iteration time is more than
``slow_factor`` times the cluster median), ``"normal"`` otherwise.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

Classification = str  # "normal" | "transient" | "persistent"

# below this relative spread, noise-free timings would flag every jitter
_MIN_REL_DEV = 0.1


@dataclass
class RobustEwma:
    """EWMA and EW mean absolute deviation; clips outliers, follows level shifts."""

    alpha: float
    factor: float
    window: int
    warmup: int = 3
    clip: float = 1.0  # an outlier enters at mean +- clip x band (0: not at all)
    mean: float = 0.0
    dev: float = 0.0
    n: int = 0
    last: float = 0.0
    last_outlier: int = 0  # +1 high outlier, -1 low outlier, 0 normal
    _run: deque[float] = field(default_factory=deque)
    _run_side: int = 0

    def band(self) -> float:
        """Half-width of the normal band around the mean."""
        return self.factor * max(self.dev, _MIN_REL_DEV * abs(self.mean))

    def update(self, x: float) -> None:
        """Fold one sample in (outliers clipped, level shifts adopted)."""
        self.last = x
        self.n += 1
        if self.n == 1:
            self.mean, self.dev, self.last_outlier = x, 0.0, 0
            return
        side = 0
        if self.n > self.warmup:
            band = self.band()
            if x > self.mean + band:
                side = 1
            elif x < self.mean - band:
                side = -1
        self.last_outlier = side
        if side == 0:
            self._run.clear()
            self._run_side = 0
            # plain averages while warming up, so the first spread is not ~0
            self._fold(
                x, max(self.alpha, 1.0 / self.n) if self.n <= self.warmup else None
            )
            return
        if side != self._run_side:
            self._run.clear()
            self._run_side = side
        self._run.append(x)
        if len(self._run) >= self.window:
            # a level shift, not noise: restart from the recent level
            level = statistics.median(self._run)
            self.dev = statistics.fmean(abs(v - level) for v in self._run)
            self.mean = level
            self._run.clear()
            self._run_side = 0
            self.last_outlier = 0
            return
        self._fold(self.mean + side * self.clip * self.band())

    def _fold(self, x: float, weight: float | None = None) -> None:
        a = self.alpha if weight is None else weight
        self.dev = (1 - a) * self.dev + a * abs(x - self.mean)
        self.mean = (1 - a) * self.mean + a * x


@dataclass
class _WorkerTimes:
    compute: RobustEwma
    comm: RobustEwma
    iteration: RobustEwma
    last_seen: float


class PerformanceMonitor:
    """Tracks per-worker timings and classifies stragglers; time is passed in.

    Parameters
    ----------
    alpha : EWMA weight of a new sample, in (0, 1].
    transient_factor : a sample more than this many deviations from the
        worker's mean is an outlier.
    persistent_window : this many outliers in a row on one side are a level
        shift that the typical time adopts at once.
    slow_factor : a worker whose typical iteration time exceeds this multiple
        of the cluster median is persistently slow.
    warmup : samples before outliers are detected at all.
    """

    def __init__(
        self,
        alpha: float = 0.2,
        transient_factor: float = 3.0,
        persistent_window: int = 3,
        *,
        slow_factor: float = 1.5,
        warmup: int = 3,
    ) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        if not transient_factor > 0:
            raise ValueError(f"transient_factor must be > 0, got {transient_factor!r}")
        if persistent_window < 1:
            raise ValueError(f"persistent_window must be >= 1, got {persistent_window}")
        if not slow_factor > 1.0:
            raise ValueError(f"slow_factor must be > 1, got {slow_factor!r}")
        if warmup < 1:
            raise ValueError(f"warmup must be >= 1, got {warmup}")
        self.alpha = alpha
        self.transient_factor = transient_factor
        self.persistent_window = persistent_window
        self.slow_factor = slow_factor
        self.warmup = warmup
        self._workers: dict[str, _WorkerTimes] = {}
        self.generation = 0  # bumped on every change, so callers can cache

    def _new_series(self) -> RobustEwma:
        return RobustEwma(
            self.alpha, self.transient_factor, self.persistent_window, self.warmup
        )

    def observe(
        self,
        worker_id: str,
        *,
        compute_time: float,
        comm_time: float,
        iteration_time: float,
        now: float,
    ) -> None:
        """Record one iteration of ``worker_id`` (times in seconds, >= 0)."""
        names = ("compute_time", "comm_time", "iteration_time")
        values = (compute_time, comm_time, iteration_time)
        for name, v in zip(names, values, strict=True):
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not isinstance(now, (int, float)) or not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        w = self._workers.get(worker_id)
        if w is None:
            w = _WorkerTimes(
                self._new_series(), self._new_series(), self._new_series(), now
            )
            self._workers[worker_id] = w
        w.compute.update(float(compute_time))
        w.comm.update(float(comm_time))
        w.iteration.update(float(iteration_time))
        w.last_seen = float(now)
        self.generation += 1

    def known(self, worker_id: str) -> bool:
        """True once the worker has at least one observation."""
        return worker_id in self._workers

    def samples(self, worker_id: str) -> int:
        """Iterations observed for this worker (0 if never)."""
        w = self._workers.get(worker_id)
        return 0 if w is None else w.iteration.n

    def overdue_after(self, worker_id: str) -> float:
        """Elapsed time past which ``overdue`` holds (inf before the warmup)."""
        w = self._workers.get(worker_id)
        if w is None or w.iteration.n < self.warmup:
            return math.inf
        return w.iteration.mean + w.iteration.band()

    def typical_iteration(self, worker_id: str) -> float:
        """Typical iteration time in seconds (NaN if never observed)."""
        w = self._workers.get(worker_id)
        return math.nan if w is None else w.iteration.mean

    def typical_compute(self, worker_id: str) -> float:
        w = self._workers.get(worker_id)
        return math.nan if w is None else w.compute.mean

    def typical_comm(self, worker_id: str) -> float:
        w = self._workers.get(worker_id)
        return math.nan if w is None else w.comm.mean

    def speed(self, worker_id: str) -> float:
        """Iterations per second from the typical time (NaN if unknown, inf if 0)."""
        t = self.typical_iteration(worker_id)
        if math.isnan(t):
            return math.nan
        return math.inf if t <= 0 else 1.0 / t

    def cluster_median(self, worker_ids: list[str] | None = None) -> float:
        """Median typical iteration time over ``worker_ids`` (default: all known)."""
        ids = self._workers.keys() if worker_ids is None else worker_ids
        times = [
            self._workers[i].iteration.mean
            for i in ids
            if i in self._workers and self._workers[i].iteration.n >= 1
        ]
        return statistics.median(times) if times else math.nan

    def classify(
        self, worker_id: str, worker_ids: list[str] | None = None
    ) -> Classification:
        """ "normal", "transient" or "persistent", against ``worker_ids``' median."""
        w = self._workers.get(worker_id)
        if w is None or w.iteration.n < self.warmup:
            return "normal"
        return self._class_of(w, self.cluster_median(worker_ids))

    def classes(self, worker_ids: list[str] | None = None) -> dict[str, Classification]:
        """``classify`` of each of ``worker_ids`` (default: all known) against
        their one median: O(N log N) for all, not a median per worker."""
        ids = list(self._workers) if worker_ids is None else worker_ids
        median = self.cluster_median(ids)
        out: dict[str, Classification] = {}
        for i in ids:
            w = self._workers.get(i)
            warm = w is not None and w.iteration.n >= self.warmup
            out[i] = self._class_of(w, median) if w is not None and warm else "normal"
        return out

    def _class_of(self, w: _WorkerTimes, median: float) -> Classification:
        if (
            not math.isnan(median)
            and median > 0
            and w.iteration.mean > self.slow_factor * median
        ):
            return "persistent"
        if w.iteration.last_outlier > 0:
            return "transient"
        return "normal"

    def overdue(self, worker_id: str, elapsed: float) -> bool:
        """Has an iteration running for ``elapsed`` s gone far past this worker's norm?

        The same band as for a transient sample, applied while the iteration is
        still running, so a disturbed worker is noticed before its push lands.
        """
        w = self._workers.get(worker_id)
        if w is None or w.iteration.n < self.warmup:
            return False
        return elapsed > w.iteration.mean + w.iteration.band()

    def persistent_ids(self, worker_ids: list[str]) -> set[str]:
        """The persistently slow among ``worker_ids``, against one shared median."""
        median = self.cluster_median(worker_ids)
        if math.isnan(median) or median <= 0:
            return set()
        limit = self.slow_factor * median
        return {
            i
            for i in worker_ids
            if i in self._workers
            and self._workers[i].iteration.n >= self.warmup
            and self._workers[i].iteration.mean > limit
        }

    def snapshot(self) -> dict[str, Any]:
        """Json-able state: per-worker typical times, spreads and class."""
        median = self.cluster_median()
        classes = self.classes()
        workers: dict[str, Any] = {}
        for wid, w in self._workers.items():
            workers[wid] = {
                "class": classes[wid],
                "samples": w.iteration.n,
                "iteration_mean": _finite(w.iteration.mean),
                "iteration_dev": _finite(w.iteration.dev),
                "iteration_last": _finite(w.iteration.last),
                "compute_mean": _finite(w.compute.mean),
                "compute_dev": _finite(w.compute.dev),
                "comm_mean": _finite(w.comm.mean),
                "comm_dev": _finite(w.comm.dev),
                "speed": _finite(self.speed(wid)),
                "last_seen": w.last_seen,
            }
        return {"cluster_median_iteration": _finite(median), "workers": workers}


def _finite(x: float) -> float | None:
    """JSON has no NaN/inf: map them to null."""
    return x if math.isfinite(x) else None
