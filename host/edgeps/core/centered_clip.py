"""Centered clipping: a push may stray from the fleet's recent updates, but boundedly.

A norm bound alone lets a worker that sends minus k times its honest update
(k under the bound) pull the model backwards at every push. Centered
clipping (Karimireddy, He and Jaggi, "Learning from History for Byzantine
Robust Optimization", ICML 2021) bounds what any one push can do relative
to the fleet instead of relative to zero: with ``ref`` the momentum of the
updates applied so far, a push ``u`` is applied as

    ref + (u - ref) x min(1, tau / ||u - ref||)

where ``tau`` is ``k`` times the median distance ``||u - ref||`` of the
recent pushes. Here it runs per push (the asynchronous reading): an honest
push, near the fleet, is applied as sent; a sign-flipped, scaled or
random-label one moves the model no further from the fleet's direction than
an honest push does, so f of N liars cost about f/N of the progress instead
of reversing it. Skewed (non-IID) honest workers sit further from ``ref``
than IID ones; a push pulled in is counted per worker (``pulled``) so a run
says what it cost the honest ones, and one its record weighed below one
(``weighed``) too.

A liar pulled in at every push still moves the model by up to tau the
wrong way; an honest worker is pulled in only now and then (its pushes lie
about the median distance away). So each worker also has a record, the
exponential average of how often it was pulled in (``alpha``, starting
from its first push once armed): past
``calm`` its pushes weigh less, linearly down to 0 at ``outlier`` (a
reputation in the manner of Kardam, Damaskinos et al., ICML 2018, which
filters asynchronous workers by how they compare with the fleet). A worker
weighed 0 no longer moves the reference either.

Gradients and deltas are kept apart (``kind``): their units differ. Nothing
is pulled in until ``warmup`` distances are known. The distances kept are
those of the pushes as sent, in a window: the median ignores up to half of
them lying. Pure: no clock, no I/O.
"""

from __future__ import annotations

import bisect
import math
from collections import deque

import numpy as np

DEFAULT_K = 2.0
DEFAULT_BETA = 0.9  # the reference's memory: about the last 10 applied updates
DEFAULT_WINDOW = 64
DEFAULT_WARMUP = 16
DEFAULT_ALPHA = 0.05  # a worker's record follows its last ~20 pushes
DEFAULT_CALM = 0.9  # pulled in at most this often: weighs one
DEFAULT_OUTLIER = 0.98  # pulled in this often or more: weighs zero


class _Kind:
    """The reference and the recent distances of one kind of update."""

    def __init__(self, n: int) -> None:
        self.ref = np.zeros(n, np.float64)
        self.recent: deque[float] = deque()
        self.sorted: list[float] = []

    def remember(self, distance: float, window: int) -> None:
        if len(self.recent) == window:
            old = self.recent.popleft()
            del self.sorted[bisect.bisect_left(self.sorted, old)]
        self.recent.append(distance)
        bisect.insort(self.sorted, distance)

    def median(self) -> float:
        s, n = self.sorted, len(self.sorted)
        return 0.5 * (s[(n - 1) // 2] + s[n // 2])


class CenteredClip:
    """Pull each push to within ``k`` x the median recent distance of the fleet.

    Parameters
    ----------
    k : multiple of the median distance a push may be from the reference (> 0).
    beta : the reference's decay per applied update, in [0, 1).
    window : how many recent distances the median is taken over.
    warmup : distances known (per kind) before any push is pulled in.
    alpha, calm, outlier : a worker's record (see above); calm < outlier <= 1.
    """

    def __init__(
        self,
        k: float = DEFAULT_K,
        *,
        beta: float = DEFAULT_BETA,
        window: int = DEFAULT_WINDOW,
        warmup: int = DEFAULT_WARMUP,
        alpha: float = DEFAULT_ALPHA,
        calm: float = DEFAULT_CALM,
        outlier: float = DEFAULT_OUTLIER,
    ) -> None:
        if not (math.isfinite(k) and k > 0.0):
            raise ValueError(f"k must be a finite number > 0, got {k!r}")
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"beta must be in [0, 1), got {beta!r}")
        if window < 1 or not 1 <= warmup <= window:
            raise ValueError("window must be >= 1 and warmup in 1..window")
        if not (0.0 < alpha <= 1.0 and 0.0 <= calm < outlier <= 1.0):
            raise ValueError("need 0 < alpha <= 1 and 0 <= calm < outlier <= 1")
        self.alpha, self.calm, self.outlier = float(alpha), float(calm), float(outlier)
        self.record: dict[str, float] = {}  # worker -> how often pulled in
        self.k, self.beta = float(k), float(beta)
        self.window, self.warmup = int(window), int(warmup)
        self._kinds: dict[str, _Kind] = {}
        self.pulled: dict[str, int] = {}  # worker -> pushes pulled in
        self.weighed: dict[str, int] = {}  # worker -> pushes its record weighed < 1
        self.seen: dict[str, int] = {}  # worker -> pushes seen

    def limit(self, kind: str) -> float | None:
        """tau: the farthest from the reference applied as sent (None: warmup)."""
        state = self._kinds.get(kind)
        if state is None or len(state.sorted) < self.warmup:
            return None
        return self.k * state.median()

    def clip(
        self, worker_id: str, update: np.ndarray, kind: str = "grad"
    ) -> np.ndarray:
        """The (finite) update as applied: itself, or pulled to within tau of the
        reference. The reference then moves towards what is applied."""
        u = np.asarray(update, np.float64).reshape(-1)
        state = self._kinds.get(kind)
        if state is None or state.ref.size != u.size:
            state = self._kinds[kind] = _Kind(u.size)
        diff = u - state.ref
        distance = float(np.linalg.norm(diff))
        tau = self.limit(kind)
        self.seen[worker_id] = self.seen.get(worker_id, 0) + 1
        applied = u
        pulled = tau is not None and math.isfinite(distance) and distance > tau
        if pulled:
            assert tau is not None
            applied = state.ref + diff * (tau / distance)
        weight = self._weigh(worker_id, pulled, tau is not None)
        if pulled:
            self.pulled[worker_id] = self.pulled.get(worker_id, 0) + 1
        if weight < 1.0:
            self.weighed[worker_id] = self.weighed.get(worker_id, 0) + 1
            applied = applied * weight
        if math.isfinite(distance):
            state.remember(distance, self.window)
            if weight > 0.0:
                state.ref *= self.beta
                state.ref += (1.0 - self.beta) * applied
        if applied is u:
            return np.asarray(update, np.float32)
        return applied.astype(np.float32)

    def _weigh(self, worker_id: str, pulled: bool, armed: bool) -> float:
        """Update the worker's record with this push; its weight in [0, 1]."""
        if not armed:
            return 1.0
        old = self.record.get(worker_id)
        # the first push once armed sets the record: a liar pulled in from its
        # first push weighs 0 at once, not after ~45 pushes of averaging
        rate = float(pulled)
        if old is not None:
            rate = (1.0 - self.alpha) * old + self.alpha * rate
        self.record[worker_id] = rate
        if rate <= self.calm:
            return 1.0
        return max(0.0, (self.outlier - rate) / (self.outlier - self.calm))

    def report(self) -> dict[str, object]:
        """Json-able: per worker, pushes pulled in, weighed < 1, seen; tau per kind."""
        return {
            "pulled": dict(sorted(self.pulled.items())),
            "weighed": dict(sorted(self.weighed.items())),
            "seen": dict(sorted(self.seen.items())),
            "record": {w: round(r, 3) for w, r in sorted(self.record.items())},
            "tau": {k: self.limit(k) for k in sorted(self._kinds)},
        }
