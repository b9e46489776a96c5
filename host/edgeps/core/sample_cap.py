"""A push's claimed sample count, capped relative to the fleet's recent claims.

A push says how many samples it was computed on, and that count weighs it
(the balancer's step weight, FedAvg's sample-weighted mean, the relay's
fold). A worker may claim any count up to 2^32 - 1; this cap keeps a claim
to ``k`` times the (lower) median of the last ``window`` claims (capped themselves,
so a run of liars cannot raise the bar beyond their share of the window).
Until ``warmup`` claims are known every claim passes (by default only the
first). Pure, no clock.
"""

from __future__ import annotations

import bisect
from collections import deque

DEFAULT_K = 4.0
DEFAULT_WINDOW = 64
DEFAULT_WARMUP = 1


class SampleCap:
    """Cap each claimed sample count at ``k`` x the median of the recent ones."""

    def __init__(
        self,
        k: float = DEFAULT_K,
        *,
        window: int = DEFAULT_WINDOW,
        warmup: int = DEFAULT_WARMUP,
    ) -> None:
        if not k >= 1.0:
            raise ValueError(f"k must be >= 1, got {k!r}")
        if window < 1 or not 1 <= warmup <= window:
            raise ValueError("window must be >= 1 and warmup in 1..window")
        self.k, self.window, self.warmup = float(k), int(window), int(warmup)
        self._recent: deque[int] = deque()
        self._sorted: list[int] = []
        self.capped = 0  # claims cut down

    def limit(self) -> int | None:
        """The largest claim that passes now; None during the warmup."""
        s, n = self._sorted, len(self._sorted)
        if n < self.warmup:
            return None
        median = s[(n - 1) // 2]  # the lower median: one liar of two loses
        return max(1, int(self.k * median))

    def cap(self, samples: int) -> int:
        """The claim as counted (<= the limit), remembered for the next ones."""
        samples = max(0, int(samples))
        limit = self.limit()
        if limit is not None and samples > limit:
            samples = limit
            self.capped += 1
        if samples > 0:  # a push that counts none says nothing about the fleet
            if len(self._recent) == self.window:
                old = self._recent.popleft()
                del self._sorted[bisect.bisect_left(self._sorted, old)]
            self._recent.append(samples)
            bisect.insort(self._sorted, samples)
        return samples
