"""The minibatch order of a worker: a seeded shuffle of its samples, epoch after epoch.

One definition for the CPython trainers (``edgeps.pyworker.trainer``) and the
simulator's boards (``edgeps.sim.simulator``), so a simulated board seeded as
an emulated sensor draws the same samples in the same order: the sequence of
minibatches decides when a run crosses its target accuracy as much as timing
does (topk:0.01 took 4.0 s simulated against 5.6 s real for this
reason alone).

``numpy.random.default_rng(seed)`` draws a permutation of the n samples; a
batch takes the next indices of it, and one that reaches its end continues
in the next permutation of the same generator (a batch may straddle two
epochs; no sample is skipped).
"""

from __future__ import annotations

import numpy as np


class Shuffle:
    """Indices of the next minibatches of ``n`` samples, in a seeded order."""

    def __init__(self, n: int, seed: int) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"a shuffle needs at least one sample, got {n!r}")
        self.n = n
        self._rng = np.random.default_rng(seed)
        self._order = self._rng.permutation(n)
        self._pos = 0
        self.epochs = 0  # complete passes over the samples

    def take(self, size: int, out: np.ndarray | None = None) -> np.ndarray:
        """The next ``size`` indices (into ``out`` when given, else a new array)."""
        if size < 1:
            raise ValueError(f"a batch needs at least one sample, got {size!r}")
        idx = out if out is not None else np.empty(size, dtype=np.intp)
        filled = 0
        while filled < size:
            take = min(size - filled, self.n - self._pos)
            idx[filled : filled + take] = self._order[self._pos : self._pos + take]
            filled += take
            self._pos += take
            if self._pos == self.n:
                self._order = self._rng.permutation(self.n)
                self._pos = 0
                self.epochs += 1
        return idx[:size]
