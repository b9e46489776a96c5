"""A competing process's CPU bursts on a clock, and how they stretch a worker's compute.

The disturbed worker of Zhang et al. (2017) shares its CPU with tasks that are
not the training. ``Bursts`` is that other task's schedule: every ``period``
seconds, starting at ``phase``, it runs for ``burst`` seconds and takes
``share`` of the CPU meanwhile. Time is an argument (seconds since the job
started: virtual in the simulator, wall-clock in the emulator and on real
processes), so the same schedule drives all three, and a computation that
would take ``w`` seconds undisturbed takes ``stretch(start, w)``: it runs at
``1 - share`` of its speed inside a burst and at full speed outside.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Bursts:
    """A periodic competitor: ``burst`` s on, every ``period`` s, from ``phase``.

    Parameters
    ----------
    burst: seconds each burst lasts (0 < burst <= period; equal: always on).
    period: seconds from one burst's start to the next.
    share: fraction of the CPU the competitor takes during a burst, [0, 1).
    phase: when the first burst at or after time 0 starts, [0, period).
    """

    burst: float
    period: float
    share: float
    phase: float = 0.0

    def __post_init__(self) -> None:
        for key in ("burst", "period", "share", "phase"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{key} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ValueError(f"{key} must be finite, got {value!r}")
        if not 0 < self.burst <= self.period:
            raise ValueError(
                f"need 0 < burst <= period, got burst={self.burst!r} "
                f"period={self.period!r}"
            )
        if not 0.0 <= self.share < 1.0:
            raise ValueError(f"share must be in [0, 1), got {self.share!r}")
        if not 0.0 <= self.phase < self.period:
            raise ValueError(f"phase must be in [0, period), got {self.phase!r}")

    @classmethod
    def seeded(cls, burst: float, period: float, share: float, seed: int = 0) -> Bursts:
        """The schedule with its phase drawn from ``seed`` (same seed, same bursts)."""
        rng = np.random.default_rng([int(seed), 0xB0257])
        return cls(burst, period, share, float(rng.uniform(0.0, period)))

    @property
    def slowdown(self) -> float:
        """How many times longer a computation takes inside a burst."""
        return 1.0 / (1.0 - self.share)

    @property
    def mean_slowdown(self) -> float:
        """Long-run stretch of continuous compute: period over work per period."""
        return self.period / (self.period - self.share * self.burst)

    def in_burst(self, t: float) -> bool:
        """Whether the competitor is running at time ``t``."""
        return (t - self.phase) % self.period < self.burst

    def _busy(self, u: float) -> float:
        """Burst seconds in [phase, phase + u) (negative u: minus those before)."""
        k = math.floor(u / self.period)
        return k * self.burst + min(u - k * self.period, self.burst)

    def overlap(self, t0: float, t1: float) -> float:
        """Seconds of burst within [t0, t1]."""
        if t1 <= t0:
            return 0.0
        return self._busy(t1 - self.phase) - self._busy(t0 - self.phase)

    def intervals(self, t0: float, t1: float) -> list[tuple[float, float]]:
        """The bursts within [t0, t1], clipped to it, in order."""
        out: list[tuple[float, float]] = []
        k = math.floor((t0 - self.phase) / self.period)
        while True:
            a = self.phase + k * self.period
            if a >= t1:
                return out
            lo, hi = max(a, t0), min(a + self.burst, t1)
            if hi > lo:
                out.append((lo, hi))
            k += 1

    def work(self, t0: float, t1: float) -> float:
        """Undisturbed compute seconds a worker gets done in [t0, t1]."""
        return max(0.0, t1 - t0) - self.share * self.overlap(t0, t1)

    def stretch(self, start: float, seconds: float) -> float:
        """Wall seconds that ``seconds`` of undisturbed compute take from ``start``."""
        if seconds <= 0 or self.share == 0:
            return max(0.0, seconds)
        u0 = start - self.phase
        target = u0 - self.share * self._busy(u0) + seconds  # work coordinate
        per_period = self.period - self.share * self.burst
        k = math.floor(target / per_period)
        rest = target - k * per_period
        in_burst = self.burst * (1.0 - self.share)
        if rest <= in_burst:
            u = k * self.period + rest / (1.0 - self.share)
        else:
            u = k * self.period + self.burst + (rest - in_burst)
        return max(seconds, u - u0)

    def describe(self) -> str:
        """``burst 2 s every 6 s, share 0.8`` for tables and logs."""
        return f"burst {self.burst:g} s every {self.period:g} s, share {self.share:g}"


def parse_bursts(text: str) -> dict[str, float]:
    """``burst=2,period=6,share=0.8`` as a dict; ValueError names a bad part."""
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"expected key=value, got {part!r}")
        try:
            out[key] = float(value)
        except ValueError:
            raise ValueError(f"{key} must be a number, got {value.strip()!r}") from None
    return out
