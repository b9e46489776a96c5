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


def _unflatten(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__array__"}:
            return arrays[value["__array__"]]
        return {k: _unflatten(v, arrays) for k, v in value.items()}
    if isinstance(value, list):
        return [_unflatten(v, arrays) for v in value]
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


def load_checkpoint(path: str | Path) -> Checkpoint:
    """Read a checkpoint; a missing or foreign file gives a clear error."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(bytes(data["header"]).decode())
            params = np.array(data["params"], dtype=np.float32)
            names = header["arrays"]
            arrays = {k: np.array(data[f"a{i}"]) for i, k in enumerate(names)}
    except (OSError, KeyError, ValueError) as exc:
        raise ValueError(f"{path} is not an edgeps checkpoint: {exc}") from exc
    if header.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown checkpoint format {header.get('format')!r}")
    state = _unflatten(header["optimizer_state"], arrays)
    return Checkpoint(
        params=params,
        version=int(header["version"]),
        optimizer_state=state,
        worker_stats=dict(header.get("worker_stats", {})),
        meta=dict(header.get("meta", {})),
    )
