"""Work assignment from the monitor: each worker's batch, so iterations even out.

After Zhang et al.'s load-balancing strategy (Wireless Networks 2019): the
performance monitor that sets the barrier also sets how much work each node
does. Pure logic, time passed in; the core feeds it every applied push and
asks it for the batch of every worker it releases.

Model. One iteration of worker i at batch b takes ``l_i + c_i + b * r_i``
seconds: ``l_i`` its link legs (release to push minus compute), ``c_i`` the
compute that does not grow with the batch (loading the model, framing the
push) and ``r_i`` its compute per sample. ``c_i`` and ``r_i`` are fitted from
the batch sizes a board has pushed (the slope between the levels of its
smallest and largest; the fixed share of its compute at the base batch at
most a half); with one size seen, ``c_i`` is 0 (proportional). So a 4x
straggler goes from 32 straight to its batch once it pushed one smaller batch
instead of creeping down by the per-sample rise of each smaller batch. The
level tracked is each push's compute scaled to the base batch by that fit,
and the link legs, both robust EWMAs (the monitor's
``RobustEwma``): a transient spike (a sample outside the normal band) does
not move them at all, a run of ``persistent_window`` (6) outliers on one side
is adopted as a new level; both start from the medians of a worker's first
``warmup`` pushes (so neither one nor two spikes at the start set an
assignment). So interference barely moves an assignment and a persistent
slowdown moves it within a few iterations. Eager, a worker is assigned from
its first push: a push bounds its pace from above (interference only slows a
board), so until ``warmup`` its levels follow its fastest push so far, and
its link legs are left out (one lost message costs a whole retry). A
warming-up board whose push at its smaller batch shows the larger one was
more than 1.5x slower than in proportion (impossible with a fixed cost >= 0)
spiked on it: that push is forgotten and the board gets its batch back.
``Balancer.for_policy`` is eager for the policies that wait for whole rounds
(BSP, K-of-N), where every round before the first assignment waits for the
stragglers, and warms up for the others.

Target. ``T* = median_i (l_i + c_i + base_batch * r_i)`` over the live,
measured workers: the iteration time of the median board at the default
batch. Assignment: ``b_i = (T* - l_i - c_i) / r_i``, rounded and clamped to
``[min_batch, min(max_batch, cap_i)]`` where ``cap_i`` is the limit the board
announced (its memory; 0 = none). A board slower than the median gets a
smaller batch; a faster one a larger batch only when ``max_batch`` allows it
(by default it does not: measured, that cost ASP and DSP time on non-IID data
and never sped BSP up). A board is slowed only if its compute at its full
batch is more than ``tolerance`` above the median board's. A new assignment
is adopted only when it differs from the current one by more than
``hysteresis`` (relative) and by more than one sample, and never right after
a transient spike (the last sample an outlier), so noise and the feedback of
a changed batch on the measured times do not make assignments oscillate.

Weight. A push steps by ``lr x min(1, samples / asked)``: a board that did
the batch it was assigned takes a full step, as without balancing; only a
push short of its assignment weighs less.

Cost. ``T*`` is a median over live workers, recomputed after every
``max(1, n_live // 4)`` observations or a change of membership, so the work
per event stays constant on average as the cluster grows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

from edgeps.core.monitor import RobustEwma
from edgeps.core.policy_api import Policy


def _check_batch(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


# recent compute times kept per batch size, and batch sizes kept, per board
_PER_SIZE = 5
_SIZES = 4
# the fixed share of a board's compute at the base batch never fits above this
_MAX_SHARE = 0.5
# a larger batch this much slower than in proportion to a smaller was a spike
_SPIKED = 1.5


class _Pace:
    __slots__ = (
        "base",
        "fixed",
        "cap",
        "batch",
        "first",
        "eager",
        "share",
        "sizes",
        "back_to",
    )

    def __init__(
        self, base: RobustEwma, fixed: RobustEwma, cap: int, batch: int
    ) -> None:
        self.base = base  # compute time at the base batch
        self.fixed = fixed  # link legs: release -> push minus compute
        self.cap = cap
        self.batch = batch
        # (samples, compute, link legs) of its first pushes, until warmed up
        self.first: list[tuple[int, float, float]] | None = []
        self.eager = False
        self.share = 0.0  # fixed compute / compute at the base batch, fitted
        self.sizes: dict[int, list[float]] = {}  # batch -> recent compute times
        self.back_to = 0  # a batch it was shrunk from on a spike, to go back to

    def fit(self, samples: int, compute: float, base_batch: int) -> None:
        """Refit the fixed share of compute from the batch sizes pushed so far.

        Compute at batch b is ``c + b * r``: with two sizes far enough apart
        (the smallest and largest seen), ``r`` is the slope between their
        levels and ``c`` what is left at zero; with one size the share stays
        0 (proportional). A size's level is the median of its recent times
        within twice their fastest (interference only slows a board).
        """
        times = self.sizes.pop(samples, [])
        times.append(compute)
        self.sizes[samples] = times[-_PER_SIZE:]  # most recently used last
        while len(self.sizes) > _SIZES:
            del self.sizes[next(iter(self.sizes))]
        lo, hi = min(self.sizes), max(self.sizes)
        if hi - lo < 2 or hi < 1.25 * lo:
            return
        m_lo, m_hi = _level(self.sizes[lo]), _level(self.sizes[hi])
        if m_hi > _SPIKED * m_lo * hi / lo and self.first is not None:
            # slower at the larger size than in proportion to the smaller, so
            # with any fixed cost >= 0 the larger was a spike (warming up,
            # it set an eager assignment): forget it, give the batch back
            del self.sizes[hi]
            self.first = [p for p in self.first if p[0] != hi]
            self.back_to = hi
            return
        rate = (m_hi - m_lo) / (hi - lo)
        if rate <= 0:
            return  # a spike at the larger size's expense: keep the last fit
        fixed = max(0.0, m_lo - lo * rate)
        self.share = min(_MAX_SHARE, fixed / (fixed + base_batch * rate))

    def at_base(self, samples: int, compute: float, base_batch: int) -> float:
        """This push's compute scaled to the base batch by the fitted model."""
        f = self.share
        return compute / (f + (1.0 - f) * samples / base_batch)

    def fold(
        self, samples: int, compute: float, fixed: float, base_batch: int, warmup: int
    ) -> None:
        """Start from the medians of the first ``warmup`` pushes, then average.

        Samples above twice the smallest are left out of that median: spikes
        among the very first iterations would otherwise set the level that the
        first assignment is computed from. Eager, the levels meanwhile follow
        the fastest push so far (interference only slows a board, so one push
        bounds its pace from above and the fastest of a few is its pace). The
        first pushes are kept as measured and scaled to the base batch by the
        latest fit, so a batch changed meanwhile does not skew the median.
        """
        if self.first is None:
            self.base.update(self.at_base(samples, compute, base_batch))
            self.fixed.update(fixed)
            return
        self.first.append((samples, compute, fixed))
        bases = [self.at_base(n, c, base_batch) for n, c, _ in self.first]
        links = [f for _, _, f in self.first]
        if len(self.first) < warmup:
            if self.eager:
                for series, values in ((self.base, bases), (self.fixed, links)):
                    series.mean = series.last = min(values)
            return
        for series, values in ((self.base, bases), (self.fixed, links)):
            # interference only ever slows a board: drop the warmup's spikes
            low = min(values)
            kept = [v for v in values if v <= 2 * low] if low > 0 else list(values)
            level = statistics.median(kept)
            series.mean, series.n, series.last = level, len(values), level
            series.dev = statistics.median(abs(v - level) for v in kept)
        self.first = None

    @property
    def ready(self) -> bool:
        return self.first is None or (self.eager and bool(self.first))


def _level(times: list[float]) -> float:
    low = min(times)
    return statistics.median([t for t in times if t <= 2 * low] if low > 0 else times)


class Balancer:
    """Assigns each worker its next batch from its measured per-sample pace.

    Parameters
    ----------
    base_batch : the batch every worker uses without balancing (see
        ``weight`` for a push's step).
    min_batch, max_batch : bounds of any assignment (defaults: base / 16,
        at least 1, and the base: a board faster than the median keeps its
        batch, as larger batches and steps only cost asynchronous policies).
    hysteresis : relative change below which an assignment stays put.
    tolerance : how much more compute than the median board's (relative) a
        board may need at its full batch before it is given a smaller one:
        below it, what a smaller batch saves is within the spread of a round
        and only costs gradient quality; its link never triggers it (a
        smaller batch does not shorten a retry).
    warmup : pushes of a worker before it is assigned anything but the base;
        its levels start from their medians over these.
    eager : assign from a worker's first push instead, its levels following
        the fastest of its pushes until ``warmup`` (off by default: a spike on
        a board's first push then gives it a smaller batch for an iteration or
        two; it never lengthens a round, as a push only bounds a board's pace
        from above, but it does change an assignment that a quiet board keeps
        otherwise). ``Balancer.for_policy`` turns it on for policies that
        wait for whole rounds (BSP, K-of-N) and leaves it off for the others.
    alpha, transient_factor, persistent_window : of the robust averages, as in
        ``edgeps.core.monitor.PerformanceMonitor``.
    """

    def __init__(
        self,
        *,
        base_batch: int = 32,
        min_batch: int | None = None,
        max_batch: int | None = None,
        hysteresis: float = 0.15,
        tolerance: float = 0.25,
        warmup: int = 3,
        eager: bool = False,
        alpha: float = 0.2,
        transient_factor: float = 3.0,
        persistent_window: int = 6,
    ) -> None:
        self.base_batch = _check_batch("base_batch", base_batch)
        self.min_batch = _check_batch(
            "min_batch", max(1, base_batch // 16) if min_batch is None else min_batch
        )
        self.max_batch = _check_batch(
            "max_batch", base_batch if max_batch is None else max_batch
        )
        if not self.min_batch <= self.base_batch <= self.max_batch:
            raise ValueError("need min_batch <= base_batch <= max_batch")
        if not (isinstance(hysteresis, (int, float)) and 0 <= hysteresis < 1):
            raise ValueError(f"hysteresis must be in [0, 1), got {hysteresis!r}")
        _check_batch("warmup", warmup)
        _check_batch("persistent_window", persistent_window)
        if not 0.0 < alpha <= 1.0 or not transient_factor > 0:
            raise ValueError("alpha must be in (0, 1] and transient_factor > 0")
        if not (isinstance(tolerance, (int, float)) and tolerance >= 0):
            raise ValueError(f"tolerance must be >= 0, got {tolerance!r}")
        self.hysteresis = float(hysteresis)
        self.tolerance = float(tolerance)
        self.warmup = warmup
        self.eager = bool(eager)
        self._ewma = (float(alpha), float(transient_factor), persistent_window)
        self._paces: dict[str, _Pace] = {}
        self._live: set[str] = set()
        self._target: float | None = None
        self._compute = math.nan  # median compute at the base batch, with T*
        self._stale_after = 0  # observations until the target is recomputed
        self.changes = 0  # assignments changed, for reports and tests

    @classmethod
    def for_policy(
        cls, policy: Policy, *, eager: bool | None = None, **options: Any
    ) -> Balancer:
        """A balancer in the mode that suits ``policy``, unless ``eager`` is given.

        Eager for a policy whose releases wait for whole rounds
        (``policy.waits_for_rounds``: BSP, K-of-N), where every round before
        the first assignment waits for the stragglers; the warm-up mode for
        the others (eager was slower for them in the policy matrix, see
        host/BENCHMARKS.md). ``options`` go to the constructor.
        """
        mode = eager_for(policy) if eager is None else bool(eager)
        return cls(eager=mode, **options)

    def _series(self) -> RobustEwma:
        a, f, w = self._ewma
        # an outlier does not move the level at all; a run of them replaces it
        return RobustEwma(a, f, w, self.warmup, clip=0.0)

    # -- what the core tells it ----------------------------------------------
    def joined(self, worker_id: str, max_batch: int = 0) -> None:
        """A worker (re)joined, announcing its batch limit (0: none)."""
        cap = int(max_batch) if max_batch and max_batch > 0 else 0
        pace = self._paces.get(worker_id)
        if pace is None:
            pace = _Pace(self._series(), self._series(), cap, self.base_batch)
            pace.eager = self.eager
            self._paces[worker_id] = pace
        pace.cap = cap
        pace.batch = self._clamp(pace, pace.batch)
        self._live.add(worker_id)
        self._target = None

    def left(self, worker_id: str) -> None:
        """A worker left; its pace is kept for when it comes back."""
        self._live.discard(worker_id)
        self._target = None

    def observe(
        self, worker_id: str, samples: int, compute_time: float, iteration: float
    ) -> None:
        """Fold in one applied push: its samples, compute and release-to-push time."""
        pace = self._paces.get(worker_id)
        samples = int(samples)
        if pace is None or samples <= 0 or not math.isfinite(compute_time):
            return
        compute = max(0.0, compute_time)
        pace.fit(samples, compute, self.base_batch)
        link = max(0.0, iteration - compute_time)
        pace.fold(samples, compute, link, self.base_batch, self.warmup)
        self._stale_after -= 1
        if self._stale_after <= 0:
            self._target = None

    # -- what the core asks ---------------------------------------------------
    def weight(self, samples: int, worker_id: str | None = None) -> float:
        """Step weight of a push of ``samples``: its samples over those asked.

        A board that did the work it was assigned steps by the full rate, as
        every push does without balancing: each push is one gradient estimate
        (its batch's mean), and each board's data keeps the weight it has
        without balancing, which matters on non-IID shards. Only a push short
        of its assignment (fewer rows than asked) weighs less, at most 1.
        Without a worker (or for one never released) the base batch is what
        was asked. Measured against ``samples / base``: that took the step of
        every small-batch board, so BSP gained less and asynchronous policies
        lost time (host/BENCHMARKS.md, "Work assignment (--balance)").
        """
        if samples <= 0:
            return 1.0
        pace = self._paces.get(worker_id) if worker_id is not None else None
        asked = self.base_batch if pace is None else pace.batch
        return min(1.0, samples / asked) if pace is not None else samples / asked

    def batch_for(self, worker_id: str) -> int:
        """The batch this worker should use in its next iteration."""
        pace = self._paces.get(worker_id)
        if pace is None:
            return self.base_batch
        if pace.back_to:
            pace.batch, pace.back_to = self._clamp(pace, pace.back_to), 0
            self.changes += 1
            return pace.batch
        if not pace.ready or pace.base.last_outlier > 0:
            # warming up, or its last iteration was a transient spike: keep it
            return pace.batch
        target = self.target()
        at_base = pace.base.mean
        if math.isnan(target) or at_base <= 0:
            return pace.batch
        # compute at batch b: fixed_compute + b * rate (fitted, else rate only)
        fixed_compute = pace.share * at_base
        rate = (at_base - fixed_compute) / self.base_batch
        # before its warmup ends (eager) a board's link legs are not trusted:
        # one lost message costs a whole retry, far more often than a spike
        link = pace.fixed.mean if pace.first is None else 0.0
        desired = self._clamp(pace, round((target - link - fixed_compute) / rate))
        full = self._clamp(pace, self.base_batch)
        if (
            desired < full
            and fixed_compute + full * rate <= (1 + self.tolerance) * self._compute
        ):
            # a smaller batch only saves compute: a board whose compute is
            # within the tolerance of the median's keeps its batch, however
            # slow its link (retries on a lossy link come in runs that the
            # averages adopt, and no batch shortens a retry)
            desired = full
        if abs(desired - pace.batch) > max(1.0, self.hysteresis * pace.batch):
            pace.batch = desired
            self.changes += 1
        return pace.batch

    def batches(self, worker_ids: Iterable[str]) -> dict[str, int]:
        return {w: self.batch_for(w) for w in worker_ids}

    def target(self) -> float:
        """``T*``: the median live board's iteration time at the base batch."""
        if self._target is None:
            ready = [p for w in self._live if (p := self._paces[w]).ready]
            times = [p.fixed.mean + p.base.mean for p in ready]
            self._target = statistics.median(times) if times else math.nan
            self._compute = (
                statistics.median(p.base.mean for p in ready) if ready else math.nan
            )
            self._stale_after = max(1, len(self._live) // 4)
        return self._target

    def _clamp(self, pace: _Pace, batch: int) -> int:
        high = min(self.max_batch, pace.cap) if pace.cap else self.max_batch
        return max(min(self.min_batch, high), min(int(batch), high))

    def describe(self) -> str:
        return (
            f"balance:base={self.base_batch},min={self.min_batch},"
            f"max={self.max_batch},hysteresis={self.hysteresis:g},"
            f"tolerance={self.tolerance:g}" + (",eager" if self.eager else "")
        )


def eager_for(policy: Policy) -> bool:
    """Whether balancing under ``policy`` assigns from a board's first push."""
    return bool(policy.waits_for_rounds)
