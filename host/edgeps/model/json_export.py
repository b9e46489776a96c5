"""The JSON export: the model card, the flat float32 parameters and metadata."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.model.card import ModelCard, TrainedModel

FORMAT = "edgeps-model-1"


def to_dict(model: TrainedModel, meta: dict[str, Any]) -> dict[str, Any]:
    spec = model.spec
    return {
        "format": FORMAT,
        **model.card.to_dict(),
        "layer_sizes": list(spec.layer_sizes),
        "activation": spec.activation if spec.kind == "mlp" else None,
        "layout": "layers in order, each W (n_in x n_out, row-major) then b (n_out)",
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
