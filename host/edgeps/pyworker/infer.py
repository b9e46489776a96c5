"""The CPython worker's inference mode: a board's ``model.bin`` on local rows.

``edgeps worker --infer --model-file model.bin --data FILE`` predicts each
row of a CSV or NPZ file with the model a board would load, prints what a
board prints for each prediction (``pred N {"id", "class", "value"}``) and,
with ``--publish``, sends the same JSON with QoS 0 on
``edgeps/<job>/pred/<id>`` (firmware/PROTOCOL.md, "Topics").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.model import mpy_export
from edgeps.model.card import TrainedModel
from edgeps.model.table import read_table
from edgeps.model.windows import Cut, check_fits


def topic_pred(job: str, wid: str) -> str:
    """The topic predictions are published on (the board's ``infer.topic_pred``)."""
    return f"edgeps/{job}/pred/{wid}"


def load_rows(
    path: str | Path, model: TrainedModel, cut: Cut | None = None
) -> np.ndarray:
    """The raw feature rows of a CSV or NPZ file (a label column is ignored);
    with ``cut``, the windows of a raw-sample CSV."""
    n = model.spec.n_features
    flags = cut.flags() if cut is not None else {}
    if flags:
        flags["channels"] = model_channels(model.spec)
    try:
        table = read_table(path, classes=model.card.classes, n_features=n, **flags)
    except ValueError:
        if model.card.classes is None:
            raise
        table = read_table(path, n_features=n, **flags)  # labels as class ids
    check_fits(model.spec, table.shape, str(path))
    if table.n_features != n:
        raise ValueError(
            f"{path}: rows of {table.n_features} values, the model takes {n}"
        )
    return table.X


def model_channels(spec: Any) -> int | None:
    """The channels of a conv model's samples (what a raw-sample CSV holds)."""
    shape = getattr(spec, "in_shape", None)
    return int(shape[0]) if shape else None


def predictions(model: TrainedModel, X: np.ndarray, wid: str) -> Iterator[str]:
    """One JSON message per row, as a board sends it."""
    names = model.card.class_names()
    for v in model.predict(X).tolist():
        if model.spec.kind == "linear":
            msg: dict[str, Any] = {"id": wid, "class": None, "value": float(v)}
        else:
            msg = {"id": wid, "class": names[int(v)], "value": int(v)}
        yield json.dumps(msg)


def run(
    model_file: str,
    data: str,
    job: str,
    wid: str,
    out: Callable[[str], None] = print,
    publish: Callable[[str, bytes], None] | None = None,
    cut: Cut | None = None,
) -> int:
    """Predict every row of ``data``; the number of predictions."""
    model = mpy_export.read(model_file)
    X = load_rows(data, model, cut)
    topic = topic_pred(job, wid)
    n = 0
    for n, text in enumerate(predictions(model, X, wid), 1):
        out(f"pred {n - 1} {text}")
        if publish is not None:
            publish(topic, text.encode())
    return n
