"""FedBuff: buffered asynchronous aggregation of deltas."""

from __future__ import annotations

import math

import numpy as np

from edgeps.core.types import Push
from edgeps.core.view import ClusterView
from edgeps.policy.asp import ASP


def staleness_weight(staleness: int) -> float:
    """1 / sqrt(1 + staleness): FedBuff's staleness scaling (Nguyen et al. 2022)
    and FedAsync's polynomial one with exponent 0.5 (Xie et al. 2019)."""
    return 1.0 / math.sqrt(1.0 + max(0, staleness))


class FedBuff(ASP):
    """FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous
    Aggregation", AISTATS 2022, Algorithm 1).

    Rule: nobody waits (ASP's release). Each delta is added to a buffer
    weighted by ``1 / sqrt(1 + staleness)``, staleness counted in applied
    aggregates; when the buffer holds K deltas their weighted sum divided by
    K is applied as one step by the server optimizer at the server lr, and
    the buffer starts again. No staleness bound: staleness only shrinks a
    delta's weight. A worker that leaves keeps its buffered delta in.
    """

    name = "fedbuff"
    aggregates = True

    def __init__(self, k: int = 10) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"fedbuff k must be an int >= 1, got {k!r}")
        self.k = k
        self._sum: np.ndarray | None = None
        self._count = 0
        self.aggregates_applied = 0

    @property
    def bound_description(self) -> str:
        return f"none (asynchronous); a step is the mean of {self.k} buffered deltas"

    def collect(
        self, view: ClusterView, push: Push, delta: np.ndarray, staleness: int
    ) -> None:
        if self._sum is None:
            self._sum = np.zeros(delta.shape, np.float64)
        self._sum += staleness_weight(staleness) * delta.astype(np.float64)
        self._count += 1

    def aggregate(self, view: ClusterView, now: float) -> np.ndarray | None:
        if self._sum is None or self._count < self.k:
            return None
        mean = (self._sum / self.k).astype(np.float32)
        self._sum, self._count = None, 0
        self.aggregates_applied += 1
        return mean

    def describe(self) -> str:
        return f"fedbuff:k={self.k}"
