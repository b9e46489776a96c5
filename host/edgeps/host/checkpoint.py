"""Checkpoints: params, version, optimizer state and per-worker stats in one .npz.

Written to a temporary file in the same directory and renamed over the old
one, so a crash mid-write never leaves a torn checkpoint behind.
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


@dataclass
class Checkpoint:
    """What a run needs to resume: model, version, optimizer state, statistics."""

    params: np.ndarray
    version: int
    optimizer_state: dict[str, Any] = field(default_factory=dict)
    worker_stats: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


def _split_state(state: dict[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Arrays go into the npz; scalars and strings into a JSON side record."""
    arrays: dict[str, np.ndarray] = {}
    scalars: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, np.ndarray):
            arrays[key] = value
        elif isinstance(value, np.generic):
            scalars[key] = value.item()
        else:
            scalars[key] = value
    return arrays, scalars


def save_checkpoint(path: str | Path, ckpt: Checkpoint) -> Path:
    """Atomically write `ckpt` to `path` (an .npz file)."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise FileNotFoundError(f"checkpoint directory does not exist: {path.parent}")
    params = np.ascontiguousarray(ckpt.params, dtype=np.float32)
    arrays, scalars = _split_state(ckpt.optimizer_state)
    header = {
        "format": FORMAT,
        "version": int(ckpt.version),
        "optimizer_scalars": scalars,
        "optimizer_arrays": sorted(arrays),
        "worker_stats": ckpt.worker_stats,
        "meta": ckpt.meta,
    }
    blobs: dict[str, Any] = {f"opt__{k}": v for k, v in arrays.items()}
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


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint; a missing or foreign file gives a clear error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(bytes(data["header"]).decode())
            params = np.array(data["params"], dtype=np.float32)
            arrays = {
                k: np.array(data[f"opt__{k}"]) for k in header["optimizer_arrays"]
            }
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"{path} is not an edgeps checkpoint: {exc}") from exc
    if header.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown checkpoint format {header.get('format')!r}")
    state: dict[str, Any] = dict(header["optimizer_scalars"])
    state.update(arrays)
    return Checkpoint(
        params=params,
        version=int(header["version"]),
        optimizer_state=state,
        worker_stats=dict(header.get("worker_stats", {})),
        meta=dict(header.get("meta", {})),
    )
