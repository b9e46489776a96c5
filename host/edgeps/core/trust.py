"""Per-worker trust: a push that points against the fleet's direction weighs less.

A norm bound alone lets a worker that sends minus k times its honest update
(k under the bound) pull the model backwards at every push. This guard keeps
the fleet's recent direction, an exponential average of the unit vectors of
the updates applied (each weighted by the trust it was given), and for each
worker the exponential average of the cosine between its pushes and that
direction. A worker whose average cosine is >= 0 weighs one; below zero its
weight falls linearly to 0 at ``-slope`` (the direction test of Zeno, Xie et
al., ICML 2019, and the reputation of FLTrust, Cao et al., NDSS 2021, with
the fleet's own running direction as the reference instead of a root data
set). Honest workers on skewed (non-IID) shards keep a positive average
cosine; each push weighed below one is counted per worker (``down``) so a
run says how many honest pushes it cost.

Nothing is down-weighted until ``warmup`` updates from at least ``quorum``
distinct workers shaped the direction. Pure: no clock, no I/O.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_BETA = 0.9  # the fleet direction's memory: ~10 applied updates
DEFAULT_ALPHA = 0.3  # a worker's trust follows its last ~3 pushes
DEFAULT_SLOPE = 0.1  # an average cosine of -slope or less weighs 0
DEFAULT_WARMUP = 16
DEFAULT_QUORUM = 3
MAX_TRACKED = 65536  # workers whose trust is kept; more: the oldest forgotten


class TrustGuard:
    """Weigh each push by its worker's trust, in [0, 1].

    Parameters
    ----------
    beta : the fleet direction's decay per applied update, in (0, 1).
    alpha : the weight of a push's cosine in its worker's trust, in (0, 1].
    slope : the average cosine (negated) at which a worker weighs 0 (> 0).
    warmup : applied updates before anyone is down-weighted.
    quorum : distinct workers before anyone is down-weighted.
    """

    def __init__(
        self,
        *,
        beta: float = DEFAULT_BETA,
        alpha: float = DEFAULT_ALPHA,
        slope: float = DEFAULT_SLOPE,
        warmup: int = DEFAULT_WARMUP,
        quorum: int = DEFAULT_QUORUM,
    ) -> None:
        if not 0.0 < beta < 1.0:
            raise ValueError(f"beta must be in (0, 1), got {beta!r}")
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        if not (math.isfinite(slope) and slope > 0.0):
            raise ValueError(f"slope must be > 0, got {slope!r}")
        if warmup < 0 or quorum < 1:
            raise ValueError("warmup must be >= 0 and quorum >= 1")
        self.beta, self.alpha, self.slope = float(beta), float(alpha), float(slope)
        self.warmup, self.quorum = int(warmup), int(quorum)
        self._direction: np.ndarray | None = None  # float64, not normalised
        self.seen = 0  # updates that shaped the direction
        self.trust: dict[str, float] = {}  # worker -> average cosine
        self.down: dict[str, int] = {}  # worker -> pushes weighed below one
        self.zeroed: dict[str, int] = {}  # worker -> pushes weighed zero

    @property
    def armed(self) -> bool:
        """True once the direction is known well enough to down-weight."""
        return self.seen >= self.warmup and len(self.trust) >= self.quorum

    def cosine(self, update: np.ndarray) -> float | None:
        """The cosine of ``update`` with the fleet direction (None: not known)."""
        ref = self._direction
        if ref is None:
            return None
        u = np.asarray(update, np.float64).reshape(-1)
        nu, nr = float(np.linalg.norm(u)), float(np.linalg.norm(ref))
        if nu == 0.0 or nr == 0.0 or not (math.isfinite(nu) and math.isfinite(nr)):
            return None
        return max(-1.0, min(1.0, float(u @ ref) / (nu * nr)))

    def weight_of(self, worker_id: str) -> float:
        """The weight the worker's trust gives it now, in [0, 1]."""
        trust = self.trust.get(worker_id)
        if trust is None or trust >= 0.0 or not self.armed:
            return 1.0
        return max(0.0, 1.0 + trust / self.slope)

    def weigh(self, worker_id: str, update: np.ndarray) -> float:
        """Update the worker's trust with this (finite) push; its weight in [0, 1].

        The push then shapes the fleet direction in proportion to that weight.
        """
        cos = self.cosine(update)
        if cos is not None:
            old = self.trust.get(worker_id)
            self.trust[worker_id] = (
                cos if old is None else ((1.0 - self.alpha) * old + self.alpha * cos)
            )
        elif worker_id not in self.trust and self._direction is not None:
            self.trust[worker_id] = 0.0
        if len(self.trust) > MAX_TRACKED:
            del self.trust[next(iter(self.trust))]
        weight = self.weight_of(worker_id)
        if weight < 1.0:
            self.down[worker_id] = self.down.get(worker_id, 0) + 1
            if weight == 0.0:
                self.zeroed[worker_id] = self.zeroed.get(worker_id, 0) + 1
        self._shape(update, weight)
        return weight

    def _shape(self, update: np.ndarray, weight: float) -> None:
        u = np.asarray(update, np.float64).reshape(-1)
        norm = float(np.linalg.norm(u))
        if norm == 0.0 or not math.isfinite(norm) or weight <= 0.0:
            return
        if self._direction is None:
            self._direction = np.zeros(u.size, np.float64)
        self._direction *= self.beta
        self._direction += ((1.0 - self.beta) * weight / norm) * u
        self.seen += 1

    def report(self) -> dict[str, object]:
        """Json-able: pushes weighed below one and zero, per worker, and the trusts."""
        return {
            "armed": self.armed,
            "down": dict(sorted(self.down.items())),
            "zeroed": dict(sorted(self.zeroed.items())),
            "trust": {w: round(t, 3) for w, t in sorted(self.trust.items())},
        }
