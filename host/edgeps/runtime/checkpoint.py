"""Checkpoints: params, version, optimizer state and per-worker stats in one .npz.

Written to a temporary file in the same directory and renamed over the old
one, so a crash mid-write never leaves a torn checkpoint behind.

Read back with bounded memory and every field checked
(`edgeps.runtime.checkpoint_read`).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

FORMAT = "edgeps-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint that cannot be used; the message names the file and the fault."""


@dataclass
class Checkpoint:
    """What a run needs to resume: model, version, optimizer state, statistics."""

    params: np.ndarray
    version: int
    optimizer_state: dict[str, Any] = field(default_factory=dict)
    worker_stats: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


def _flatten(value: Any, path: str, arrays: dict[str, np.ndarray]) -> Any:
    """Arrays go into the npz under a path key; the rest stays JSON with a pointer."""
    if isinstance(value, np.ndarray):
        arrays[path] = value
        return {"__array__": path}
    if isinstance(value, dict):
        return {str(k): _flatten(v, f"{path}/{k}", arrays) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_flatten(v, f"{path}/{i}", arrays) for i, v in enumerate(value)]
    if isinstance(value, np.generic):
        return value.item()
    return value


def save_checkpoint(path: str | Path, ckpt: Checkpoint) -> Path:
    """Atomically write `ckpt` to `path` (an .npz file)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise FileNotFoundError(f"checkpoint directory does not exist: {path.parent}")
    params = np.ascontiguousarray(ckpt.params, dtype=np.float32)
    arrays: dict[str, np.ndarray] = {}
    state = _flatten(ckpt.optimizer_state, "opt", arrays)
    header = {
        "format": FORMAT,
        "version": int(ckpt.version),
        "optimizer_state": state,
        "arrays": sorted(arrays),
        "worker_stats": ckpt.worker_stats,
        "meta": ckpt.meta,
    }
    blobs: dict[str, Any] = {f"a{i}": arrays[k] for i, k in enumerate(sorted(arrays))}
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                params=params,
                header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
                **blobs,
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | Path, *, n_params: int | None = None) -> Checkpoint:
    """Read and check a checkpoint; a missing file is FileNotFoundError, any other
    fault a `CheckpointError` (a ValueError) naming the file.

    With ``n_params`` (the model's size) every array must hold exactly that many
    float32 values, and no member may declare more bytes than that needs (plus a
    small margin) before anything is decompressed. Without it, no member may
    declare more bytes than the file holds (what `save_checkpoint` writes).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if n_params is not None and (isinstance(n_params, bool) or n_params < 1):
        raise ValueError(f"n_params must be a positive int, got {n_params!r}")
    from edgeps.runtime.checkpoint_read import Reader

    return Reader(path, n_params).read()
