"""Models from files: a checkpoint's parameters and meta, or a JSON/ONNX export."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import numpy as np

from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard, TrainedModel


class Predictor(Protocol):
    """What ``edgeps predict`` needs of a model, however it was stored."""

    @property
    def card(self) -> ModelCard: ...

    @property
    def spec(self) -> ModelSpec: ...

    def scores(self, X: np.ndarray) -> np.ndarray: ...

    def predict(self, X: np.ndarray) -> np.ndarray: ...


def from_checkpoint(
    params: np.ndarray, meta: dict[str, Any], source: str
) -> TrainedModel:
    """The model of a checkpoint (its params and meta, as the runtime reads them)."""
    try:
        return TrainedModel(ModelCard.from_dict(meta), params)
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"{source}: {exc}") from None


def load_export(path: str | Path) -> tuple[Predictor, dict[str, Any]]:
    """A JSON, ONNX or MicroPython (.bin) export and its metadata."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"no model file at {p}")
    suffix = p.suffix.lower()
    if suffix == ".json":
        from edgeps.model.json_export import read

        return read(p)
    if suffix == ".onnx":
        from edgeps.model.onnx_export import OnnxModel

        m = OnnxModel(p)
        return m, m.meta
    if suffix == ".bin":
        from edgeps.model import mpy_export

        return mpy_export.read(p), {}
    raise ValueError(
        f"{p}: a model is a checkpoint (.npz) or an export (.json, .onnx, .bin)"
    )
