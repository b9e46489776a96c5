"""FedAsync: each delta mixed into the model as it arrives, staleness-decayed."""

from __future__ import annotations

import math

import numpy as np

from edgeps.core.types import Push
from edgeps.core.view import ClusterView
from edgeps.policy.asp import ASP
from edgeps.policy.fedbuff import staleness_weight


class FedAsync(ASP):
    """FedAsync (Xie, Koyejo and Gupta, "Asynchronous Federated Optimization",
    2019) with its polynomial staleness function, exponent 0.5.

    Rule: nobody waits (ASP's release); each delta is applied at once as
    one step weighted ``a x (1 + staleness)^-0.5``. Our reading: FedAsync
    mixes x <- (1 - w) x + w x_new with x_new = x_base - delta; the PS keeps
    no past versions, so it applies x <- x - w delta, the same when the
    delta is fresh and without FedAsync's pull back towards x_base when it
    is stale. No staleness bound: staleness only shrinks the weight.
    """

    name = "fedasync"
    aggregates = True

    def __init__(self, a: float = 0.6) -> None:
        if not (isinstance(a, (int, float)) and math.isfinite(a) and 0 < a <= 1):
            raise ValueError(f"fedasync a must be in (0, 1], got {a!r}")
        self.a = float(a)
        self._sum: np.ndarray | None = None

    @property
    def bound_description(self) -> str:
        return f"none (asynchronous); a delta weighs {self.a:g} x (1 + staleness)^-0.5"

    def collect(
        self, view: ClusterView, push: Push, delta: np.ndarray, staleness: int
    ) -> None:
        mixed = (self.a * staleness_weight(staleness)) * delta.astype(np.float64)
        self._sum = mixed if self._sum is None else self._sum + mixed

    def aggregate(self, view: ClusterView, now: float) -> np.ndarray | None:
        out, self._sum = self._sum, None
        return None if out is None else out.astype(np.float32)

    def describe(self) -> str:
        return f"fedasync:a={self.a:g}"
