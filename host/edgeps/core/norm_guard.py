"""A guard against outsized updates: at most k times the median of recent norms.

A fixed ``--max-update-norm`` needs the right number for each model and
stage of training; this guard needs none. It keeps the L2 norms of the last
``window`` applied updates and refuses (reason ``norm``) a push whose norm
exceeds ``k`` times their median, once ``warmup`` norms are known. The median
ignores a few outliers of its own window, so one outsized push neither gets
in nor raises the bar for the next one: a finite gradient 10^4 times the usual
size, from anyone, is refused instead of wrecking the model. Honest
gradients shrink as training converges and the bar follows them, ``window``
applied updates behind.

Defaults: k = 10, window = 64, warmup = 8. The window is counted in applied
updates rather than seconds, so it follows training at any update rate; the
guard needs no clock. It is pure logic, called from the content checks
(`edgeps.core.validate.content_problem`) and fed by the server after each
applied update. Limits: the first ``warmup`` updates of a run (a resume
included) are checked only against ``--max-update-norm``; and a live worker
that pushes many tiny updates lowers the median, so honest updates could be
refused: the guard bounds damage by size, it does not authenticate anyone.
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
    warmup : applied updates needed before the guard refuses anything.
    """

    def __init__(
        self,
        k: float = DEFAULT_K,
        *,
        window: int = DEFAULT_WINDOW,
        warmup: int = DEFAULT_WARMUP,
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
        self.refused = 0

    def __len__(self) -> int:
        return len(self._recent)

    def median(self) -> float | None:
        """The median of the recent norms, or None while there are none."""
        s, n = self._sorted, len(self._sorted)
        if n == 0:
            return None
        return 0.5 * (s[(n - 1) // 2] + s[n // 2])

    def limit(self) -> float | None:
        """The largest norm admitted now; None while warming up (no limit)."""
        median = self.median()
        if len(self._sorted) < self.warmup or median is None or median <= 0.0:
            return None  # a zero median would refuse every nonzero update
        return self.k * median

    def admits(self, norm: float) -> bool:
        """True if an update of this (finite) norm may be applied; counts refusals."""
        limit = self.limit()
        if limit is None or norm <= limit:
            return True
        self.refused += 1
        return False

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
