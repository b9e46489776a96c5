"""The JSON export: the model card, its layers, the flat float32 params, metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.model import architecture
from edgeps.model.card import ModelCard, TrainedModel

FORMAT = "edgeps-model-1"


DENSE_LAYOUT = "layers in order, each W (n_in x n_out, row-major) then b (n_out)"
CONV_LAYOUT = (
    "layers in order: a conv's W (filters x channels x kernel[ x kernel], "
    "row-major) then b (filters); a dense layer's W (n_in x n_out, row-major) "
    "then b (n_out); pools have none; inputs are flattened channel first"
)


def to_dict(model: TrainedModel, meta: dict[str, Any]) -> dict[str, Any]:
    spec = model.spec
    info = architecture.describe(spec)
    shape: dict[str, Any]
    if spec.is_conv:
        shape = {"in_shape": list(spec.in_shape), "layout": CONV_LAYOUT}
    else:
        shape = {
            "layer_sizes": list(spec.layer_sizes),
            "activation": spec.activation if spec.kind == "mlp" else None,
            "layout": DENSE_LAYOUT,
        }
    return {
        "format": FORMAT,
        **model.card.to_dict(),
        **shape,
        "architecture": info["architecture"],
        "n_params": info["params"],
        "macs": info["macs"],
        "layers": architecture.layers(spec),
        "params": [float(v) for v in model.params],  # float32 values, exact
        "meta": meta,
    }


def write(model: TrainedModel, path: Path, meta: dict[str, Any]) -> Path:
    path.write_text(json.dumps(to_dict(model, meta)) + "\n", encoding="utf-8")
    return path


def read(path: str | Path) -> tuple[TrainedModel, dict[str, Any]]:
    """A JSON export back as a model, and its metadata."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable JSON model: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not an edgeps JSON model (format {FORMAT})")
    try:
        card = ModelCard.from_dict(data)
        params = np.asarray(data.get("params", []), dtype=np.float32)
        if params.ndim != 1:
            raise ValueError("params must be a flat list of numbers")
        meta = data.get("meta") or {}
        if not isinstance(meta, dict):
            raise ValueError("meta must be an object")
        return TrainedModel(card, params), dict(meta)
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        raise ValueError(f"{path}: not a usable JSON model: {exc}") from None
