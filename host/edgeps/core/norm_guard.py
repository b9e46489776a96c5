"""Bounded influence: an update is clipped to k times the median of recent norms.

A fixed ``--max-update-norm`` needs the right number for each model and
stage of training; this bound needs none. It keeps the L2 norms of the last
``window`` applied updates; an update whose norm exceeds ``k`` times their
median is scaled down to that bound and applied (counted as clipped), never
refused, so an honest worker whose gradients are larger than the others'
still moves the model and still answers the barrier, while a finite gradient
10^4 times the usual size, from anyone, moves it by at most the bound.

The bound is in force from the first push: until ``warmup`` norms are known
each missing one counts as ``prior``, the norm of the initial parameters (an
update may not be much larger than the model it updates). The median ignores
a few outliers of its own window, and the norms kept are those applied (after
clipping), so no run of outsized pushes raises the bar by more than their
share of the window. The window is counted in applied updates, so it follows
training at any update rate; the guard needs no clock.
"""

from __future__ import annotations

import bisect
import math
from collections import deque

DEFAULT_K = 10.0
DEFAULT_WINDOW = 64
DEFAULT_WARMUP = 8


class NormGuard:
    """Admit an update's norm only within ``k`` x the median of the recent norms.

    Parameters
    ----------
    k : multiple of the median allowed (> 1).
    window : how many applied updates' norms the median is taken over.
    warmup : applied updates after which the prior no longer counts.
    prior : the norm each of the first ``warmup`` missing norms counts as; the
        server sets it from the initial parameters when left None.
    """

    def __init__(
        self,
        k: float = DEFAULT_K,
        *,
        window: int = DEFAULT_WINDOW,
        warmup: int = DEFAULT_WARMUP,
        prior: float | None = None,
    ) -> None:
        if isinstance(k, bool) or not isinstance(k, int | float):
            raise TypeError(f"k must be a number, got {k!r}")
        if not math.isfinite(k) or k <= 1.0:
            raise ValueError(f"k must be a finite number > 1, got {k!r}")
        if not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}")
        if not isinstance(warmup, int) or not 1 <= warmup <= window:
            raise ValueError(f"warmup must be an int in 1..window, got {warmup!r}")
        self.k = float(k)
        self.window = window
        self.warmup = warmup
        self._recent: deque[float] = deque()  # in arrival order
        self._sorted: list[float] = []  # the same norms, sorted
        self.prior = None if prior is None else self._positive(prior)
        self.clipped = 0

    @staticmethod
    def _positive(value: float) -> float:
        value = float(value)
        if not math.isfinite(value) or value <= 0.0:
            raise ValueError(f"prior must be a finite number > 0, got {value!r}")
        return value

    def __len__(self) -> int:
        return len(self._recent)

    def median(self) -> float | None:
        """The median of the recent norms, or None while there are none."""
        s, n = self._sorted, len(self._sorted)
        if n == 0:
            return None
        return 0.5 * (s[(n - 1) // 2] + s[n // 2])

    def limit(self) -> float | None:
        """The largest norm applied unclipped now; None only with no prior and no norm.

        Until ``warmup`` norms are known, the missing ones count as ``prior``.
        """
        known = self._sorted
        missing = self.warmup - len(known) if self.prior is not None else 0
        if missing > 0:
            assert self.prior is not None
            padded = sorted([*known, *([self.prior] * missing)])
            median = 0.5 * (padded[(len(padded) - 1) // 2] + padded[len(padded) // 2])
        else:
            median_or_none = self.median()
            if median_or_none is None:
                return None
            median = median_or_none
        if median <= 0.0:
            return None  # all-zero updates so far: nothing to scale against
        return self.k * median

    def clip_scale(self, norm: float) -> float:
        """The factor that brings an update of this (finite) norm within the bound."""
        limit = self.limit()
        if limit is None or norm <= limit:
            return 1.0
        self.clipped += 1
        return limit / norm

    def accept(self, norm: float) -> None:
        """Record the norm of an update that was applied."""
        norm = float(norm)
        if not math.isfinite(norm) or norm < 0.0:
            raise ValueError(f"norm must be finite and >= 0, got {norm!r}")
        if len(self._recent) == self.window:
            old = self._recent.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        self._recent.append(norm)
        bisect.insort(self._sorted, norm)
