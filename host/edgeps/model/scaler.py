"""The feature scaler that is part of a model: per-feature mean and std.

It is kept as moments (row count, per-feature sums and sums of squares), so
scalers of several parts of a data set (workers' files, file chunks) combine
exactly with `Scaler.merge`; mean and std are derived from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# a feature with a smaller std is constant: it is centred, not divided
MIN_STD = 1e-8


@dataclass(frozen=True)
class Scaler:
    """Standardises features: ``(x - mean) / std``, per feature."""

    n: int
    s1: np.ndarray  # float64 (n_features,): sums
    s2: np.ndarray  # float64 (n_features,): sums of squares

    def __post_init__(self) -> None:
        s1 = np.asarray(self.s1, dtype=np.float64).reshape(-1)
        s2 = np.asarray(self.s2, dtype=np.float64).reshape(-1)
        if isinstance(self.n, bool) or int(self.n) != self.n or self.n < 1:
            raise ValueError(f"a scaler needs at least one row, got n={self.n!r}")
        if s1.shape != s2.shape or s1.size == 0:
            raise ValueError("sums and sums of squares need one value per feature")
        if not (np.all(np.isfinite(s1)) and np.all(np.isfinite(s2))):
            raise ValueError("scaler moments must be finite")
        object.__setattr__(self, "n", int(self.n))
        object.__setattr__(self, "s1", s1)
        object.__setattr__(self, "s2", s2)

    @classmethod
    def from_moments(cls, n: int, s1: Any, s2: Any) -> Scaler:
        """A scaler from a row count, per-feature sums and sums of squares."""
        f64 = np.float64
        return cls(n, np.asarray(s1, dtype=f64), np.asarray(s2, dtype=f64))

    @classmethod
    def fit(cls, X: np.ndarray) -> Scaler:
        """The scaler of the rows of ``X`` (n, n_features)."""
        X64 = np.asarray(X, dtype=np.float64)
        if X64.ndim != 2 or X64.shape[0] == 0:
            raise ValueError("fit needs a non-empty 2-D feature array")
        return cls(X64.shape[0], X64.sum(axis=0), np.square(X64).sum(axis=0))

    def merge(self, other: Scaler) -> Scaler:
        """The scaler of both parts' rows together."""
        if other.n_features != self.n_features:
            raise ValueError(
                f"cannot merge scalers of {self.n_features} and "
                f"{other.n_features} features"
            )
        return Scaler(self.n + other.n, self.s1 + other.s1, self.s2 + other.s2)

    @property
    def n_features(self) -> int:
        return int(self.s1.size)

    @property
    def mean(self) -> np.ndarray:
        """Per-feature mean, float64."""
        return self.s1 / self.n

    @property
    def std(self) -> np.ndarray:
        """Per-feature population std, float64; 1 where a feature is constant."""
        var = np.maximum(self.s2 / self.n - np.square(self.mean), 0.0)
        sd = np.sqrt(var)
        return np.where(sd < MIN_STD * np.maximum(1.0, np.abs(self.mean)), 1.0, sd)

    def offset_scale(self) -> tuple[np.ndarray, np.ndarray]:
        """float32 ``mean`` and ``1 / std``: what every export computes with."""
        return self.mean.astype(np.float32), (1.0 / self.std).astype(np.float32)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """``(X - mean) * (1 / std)`` in float32, C-contiguous (a new array)."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.n_features:
            raise ValueError(
                f"the scaler takes {self.n_features} features, got shape {X.shape}"
            )
        mean, inv = self.offset_scale()
        return np.ascontiguousarray((X.astype(np.float32) - mean) * inv)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: moments plus the derived mean and std (readers use those)."""
        return {
            "n": self.n,
            "s1": self.s1.tolist(),
            "s2": self.s2.tolist(),
            "mean": self.mean.tolist(),
            "std": self.std.tolist(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Scaler:
        if not isinstance(data, dict):
            raise ValueError("a scaler is a mapping with n, s1 and s2")
        try:
            return cls.from_moments(int(data["n"]), data["s1"], data["s2"])
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed scaler: {exc!r}") from None
