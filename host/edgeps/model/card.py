"""What travels with a model's weights: its spec, label names and feature scaler.

A `ModelCard` belongs to the job. It is written into every checkpoint's meta
and every export, and its ``to_dict`` form is plain JSON so that the job's
welcome to workers can carry it too. `TrainedModel` is a card plus the flat
parameter vector: what evaluation, ``edgeps predict`` and the export writers
compute with, always scaling the raw features first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgeps import kernels
from edgeps.kernels import ModelSpec
from edgeps.model.scaler import Scaler
from edgeps.model.table import check_classes


@dataclass(frozen=True)
class ModelCard:
    """The model's spec, class names (None: class ids), scaler (None: raw features)."""

    spec: ModelSpec
    classes: tuple[str, ...] | None = None
    scaler: Scaler | None = None
    feature_names: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.classes is not None:
            check_classes(self.classes)
            want = 2 if self.spec.kind == "logistic" else self.spec.n_classes
            if self.spec.kind == "linear" or len(self.classes) != want:
                raise ValueError(
                    f"model {self.spec} cannot have the {len(self.classes)} classes "
                    f"{', '.join(self.classes)}"
                )
        if self.scaler is not None and self.scaler.n_features != self.spec.n_features:
            raise ValueError(
                f"the scaler has {self.scaler.n_features} features, model "
                f"{self.spec} takes {self.spec.n_features}"
            )
        if (
            self.feature_names is not None
            and len(self.feature_names) != self.spec.n_features
        ):
            object.__setattr__(self, "feature_names", None)

    @property
    def n_outputs(self) -> int:
        """Classes for a classifier (2 for logistic), 1 for linear."""
        if self.spec.kind == "linear":
            return 1
        return 2 if self.spec.kind == "logistic" else self.spec.n_classes

    def class_names(self) -> tuple[str, ...]:
        """The label names, or the class ids as text when the labels were numbers."""
        if self.classes is not None:
            return self.classes
        return tuple(str(i) for i in range(self.n_outputs))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: checkpoint meta, the JSON export, a future welcome message."""
        return {
            "model": str(self.spec),
            "classes": list(self.classes) if self.classes is not None else None,
            "scaler": self.scaler.to_dict() if self.scaler is not None else None,
            "feature_names": (
                list(self.feature_names) if self.feature_names is not None else None
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelCard:
        """Read ``to_dict``'s form (extra keys, as in checkpoint meta, are ignored)."""
        if "model" not in data:
            raise ValueError("no model spec in the model's metadata")
        classes = data.get("classes")
        scaler = data.get("scaler")
        names = data.get("feature_names")
        return cls(
            ModelSpec.parse(str(data["model"])),
            tuple(str(c) for c in classes) if classes is not None else None,
            Scaler.from_dict(scaler) if scaler is not None else None,
            tuple(str(n) for n in names) if names is not None else None,
        )


@dataclass(frozen=True)
class TrainedModel:
    """A card and its parameters: predictions on raw (unscaled) features."""

    card: ModelCard
    params: np.ndarray  # float32 (spec.n_params,)

    def __post_init__(self) -> None:
        p = np.ascontiguousarray(self.params, dtype=np.float32).reshape(-1)
        if p.size != self.card.spec.n_params:
            raise ValueError(
                f"{p.size} parameters, model {self.card.spec} has "
                f"{self.card.spec.n_params}"
            )
        if not np.isfinite(p).all():
            # a diverged run or a damaged file: every prediction would be wrong
            raise ValueError("its parameters are not all finite (NaN or inf)")
        object.__setattr__(self, "params", p)

    @property
    def spec(self) -> ModelSpec:
        return self.card.spec

    def prepare(self, X: np.ndarray) -> np.ndarray:
        """Raw features as the model takes them: scaled when the card has a scaler."""
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.spec.n_features:
            raise ValueError(
                f"model {self.spec} takes {self.spec.n_features} features, "
                f"got data of shape {X.shape}"
            )
        if self.card.scaler is not None:
            return self.card.scaler.transform(X)
        return np.ascontiguousarray(X, dtype=np.float32)

    def scores(self, X: np.ndarray) -> np.ndarray:
        """Values (linear), P(class 1) (logistic) or class probabilities."""
        return np.asarray(kernels.forward(self.spec, self.params, self.prepare(X)))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Values for linear, int32 class ids otherwise."""
        return to_predictions(self.spec.kind, self.scores(X))


def to_predictions(kind: str, scores: np.ndarray) -> np.ndarray:
    """Class ids (or values) from a forward pass's output, the kernels' rule."""
    if kind == "linear":
        return np.asarray(scores, dtype=np.float32).reshape(-1)
    if kind == "logistic":
        return (np.asarray(scores).reshape(-1) >= 0.5).astype(np.int32)
    return np.argmax(scores, axis=1).astype(np.int32)
