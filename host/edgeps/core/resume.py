"""Checking a checkpoint before a parameter server resumes from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from edgeps import kernels
from edgeps.core.args import check_int, check_params, check_worker_id
from edgeps.core.types import WorkerStats

MAX_VERSION = 2**32 - 1  # the wire carries parameter versions as u32
MAX_COUNT = 2**63 - 1


@dataclass(frozen=True)
class Checkpoint:
    """A checked checkpoint: the version, the params (None: keep) and carried stats."""

    version: int
    params: np.ndarray | None
    worker_stats: dict[str, WorkerStats]

    @property
    def max_staleness(self) -> int:
        """The largest staleness the carried workers saw (0 if none)."""
        return max((s.max_staleness for s in self.worker_stats.values()), default=0)


def checked_checkpoint(
    version: int,
    params: np.ndarray | None,
    worker_stats: dict[str, WorkerStats] | None,
    current: np.ndarray,
    joined: bool,
    optimizer_state: dict[str, Any] | None = None,
) -> Checkpoint:
    """Version, params shaped as ``current``, ``worker_stats`` and the optimizer
    state's buffers, checked before any join.

    ``worker_stats`` carry each worker's counters over, so a worker id that
    joins again continues from them; ``joined`` says a worker is live already.
    The optimizer's own ``load_state_dict`` checks its name and buffer names;
    here every buffer must be a finite float32 vector the size of ``current``.
    """
    version = check_int("version", version)
    if version > MAX_VERSION:
        raise ValueError(f"version must be at most {MAX_VERSION}, got {version}")
    if joined:
        raise ValueError("restore a checkpoint before workers join")
    if params is not None:
        check_params(params, current.shape)
    if optimizer_state:
        _check_buffers(optimizer_state, current.shape)
    carried: dict[str, WorkerStats] = {}
    for wid, stats in (worker_stats or {}).items():
        carried[check_worker_id(wid)] = _checked_stats(wid, stats)
    return Checkpoint(int(version), params, carried)


def _check_buffers(state: dict[str, Any], shape: tuple[int, ...]) -> None:
    if not isinstance(state, dict):
        raise TypeError("optimizer_state must be a dict from state_dict()")
    buffers = state.get("buffers", {})
    if not isinstance(buffers, dict):
        raise ValueError("optimizer_state's buffers must be a dict")
    for name, buf in buffers.items():
        if not isinstance(buf, np.ndarray) or buf.dtype != np.float32:
            raise ValueError(f"optimizer buffer {name!r} must be a float32 array")
        if buf.shape != shape:
            raise ValueError(
                f"optimizer buffer {name!r} must have shape {shape}, got {buf.shape}"
            )
        if not kernels.all_finite(np.ascontiguousarray(buf)):
            raise ValueError(f"optimizer buffer {name!r} holds NaN or inf")


def _checked_stats(wid: str, stats: object) -> WorkerStats:
    if not isinstance(stats, WorkerStats):
        raise TypeError(f"stats of {wid!r} must be WorkerStats")
    check_int(f"accepted of {wid!r}", stats.accepted)
    check_int(f"max_staleness of {wid!r}", stats.max_staleness)
    if not isinstance(stats.rejected, dict):
        raise TypeError(f"rejected of {wid!r} must be a dict of counts")
    for reason, count in stats.rejected.items():
        if not isinstance(reason, str):
            raise TypeError(f"rejected reasons of {wid!r} must be str")
        check_int(f"rejected[{reason!r}] of {wid!r}", count)
    for count in (stats.accepted, stats.max_staleness, *stats.rejected.values()):
        if count > MAX_COUNT:
            raise ValueError(f"a counter of {wid!r} is above {MAX_COUNT}: {count}")
    return stats
