"""Export writers, one per format, looked up by name: ``WRITERS["onnx"]``.

A writer is a function ``(model, path, meta) -> Path`` that writes a
`TrainedModel` (weights, scaler, class names) to ``path``; ``meta`` is extra
JSON-ready information (job, accuracy, version) it may record. `register`
adds a format, so a new target (a MicroPython model file) is one module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeps.model.card import TrainedModel

WriteFn = Callable[[TrainedModel, Path, dict[str, Any]], Path]


@dataclass(frozen=True)
class Writer:
    name: str
    suffix: str  # the file name ending a path gets when none is given
    write: WriteFn
    help: str


WRITERS: dict[str, Writer] = {}


def register(writer: Writer) -> None:
    WRITERS[writer.name] = writer


def _builtin() -> None:
    from edgeps.model import c_export, json_export, mpy_export, onnx_export

    register(Writer("onnx", ".onnx", onnx_export.write, "ONNX graph (onnxruntime)"))
    register(Writer("c", ".h", c_export.write, "C header over native/'s kernels"))
    register(Writer("json", ".json", json_export.write, "weights and metadata"))
    register(Writer("micropython", ".bin", mpy_export.write, "model.bin for a board"))


_builtin()


def export(
    model: TrainedModel, fmt: str, path: str | Path, meta: dict[str, Any] | None = None
) -> Path:
    """Write ``model`` in format ``fmt`` to ``path``; returns the path written."""
    writer = WRITERS.get(fmt)
    if writer is None:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(WRITERS)}")
    return writer.write(model, Path(path), dict(meta or {}))
