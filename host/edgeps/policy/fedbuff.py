"""FedBuff: buffered asynchronous aggregation of deltas."""

from __future__ import annotations

import math

import numpy as np

from edgeps.core.types import Push
from edgeps.core.view import ClusterView
from edgeps.policy.asp import ASP
from edgeps.policy.robust import DEFAULT_RULE, combine, parse_rule


def staleness_weight(staleness: int) -> float:
    """1 / sqrt(1 + staleness): FedBuff's staleness scaling (Nguyen et al. 2022)
    and FedAsync's polynomial one with exponent 0.5 (Xie et al. 2019)."""
    return 1.0 / math.sqrt(1.0 + max(0, staleness))


class FedBuff(ASP):
    """FedBuff (Nguyen et al., "Federated Learning with Buffered Asynchronous
    Aggregation", AISTATS 2022, Algorithm 1).

    Rule: nobody waits (ASP's release). Each delta is added to a buffer
    weighted by ``1 / sqrt(1 + staleness)``, staleness counted in applied
    aggregates; when the buffer holds K deltas they are combined into one
    step, applied by the server optimizer at the server lr, and the buffer
    starts again. No staleness bound: staleness only shrinks a delta's
    weight. A worker that leaves keeps its buffered delta in.

    ``agg``: how the buffer is combined (``edgeps.policy.robust``): by default
    the coordinate-wise trimmed mean ``trim:0.25`` of the weighted deltas
    (Byzantine-robust; at K < 4 nothing is cut, at K = 4 the middle two of
    every coordinate), ``median``, or ``mean``: Algorithm 1's weighted sum
    divided by K.
    """

    name = "fedbuff"
    aggregates = True

    def __init__(self, k: int = 10, *, agg: str = DEFAULT_RULE) -> None:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"fedbuff k must be an int >= 1, got {k!r}")
        self.k = k
        self.agg = agg
        self._rule, self._frac = parse_rule(agg)
        self._buffer: list[np.ndarray] = []  # staleness-weighted deltas
        self.aggregates_applied = 0

    @property
    def bound_description(self) -> str:
        return f"none (asynchronous); a step is the mean of {self.k} buffered deltas"

    def collect(
        self, view: ClusterView, push: Push, delta: np.ndarray, staleness: int
    ) -> None:
        self._buffer.append(staleness_weight(staleness) * delta.astype(np.float64))

    def aggregate(self, view: ClusterView, now: float) -> np.ndarray | None:
        if len(self._buffer) < self.k:
            return None
        buffer, self._buffer = self._buffer, []
        self.aggregates_applied += 1
        if self._rule == "mean":
            return (np.sum(buffer, axis=0) / self.k).astype(np.float32)
        return combine(buffer, [1.0] * len(buffer), self._rule, self._frac)

    def describe(self) -> str:
        agg = "" if self.agg == DEFAULT_RULE else f",agg={self.agg}"
        return f"fedbuff:k={self.k}{agg}"
