"""How well predictions match labels: accuracy and a confusion matrix, or R2 and MAE."""

from __future__ import annotations

from typing import Any

import numpy as np


def confusion(y: np.ndarray, pred: np.ndarray, n_classes: int) -> np.ndarray:
    """Counts (true class x predicted class), int64."""
    m = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(m, (np.asarray(y, dtype=np.int64), np.asarray(pred, dtype=np.int64)), 1)
    return m


def classification(
    y: np.ndarray, pred: np.ndarray, classes: tuple[str, ...]
) -> dict[str, Any]:
    """Accuracy and the confusion matrix of class ids against ``classes``."""
    y = np.asarray(y)
    if y.dtype.kind not in "iu" or y.min() < 0 or y.max() >= len(classes):
        raise ValueError(
            f"labels must be class ids 0..{len(classes) - 1} (or the class names "
            f"{', '.join(classes)})"
        )
    return {
        "accuracy": float(np.mean(pred == y)),
        "classes": list(classes),
        "confusion": confusion(y, pred, len(classes)).tolist(),
    }


def regression(y: np.ndarray, pred: np.ndarray) -> dict[str, Any]:
    """R2 (1 - SSE / SST) and the mean absolute error."""
    y64 = np.asarray(y, dtype=np.float64)
    err = np.asarray(pred, dtype=np.float64) - y64
    sst = float(np.sum(np.square(y64 - y64.mean())))
    r2 = 1.0 - float(np.sum(np.square(err))) / sst if sst > 0 else float("nan")
    return {"r2": r2, "mae": float(np.mean(np.abs(err)))}


def confusion_table(result: dict[str, Any]) -> str:
    """The confusion matrix as aligned text: rows true, columns predicted."""
    names = [str(c) for c in result["classes"]]
    rows = result["confusion"]
    width = max(len(n) for n in [*names, *(str(v) for r in rows for v in r)]) + 1
    head = " " * width + "".join(n.rjust(width) for n in names) + "   <- predicted"
    lines = [head]
    for name, row in zip(names, rows, strict=True):
        lines.append(name.rjust(width) + "".join(str(v).rjust(width) for v in row))
    return "\n".join(lines)
