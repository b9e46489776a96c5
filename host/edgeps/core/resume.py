"""Checking a checkpoint before a parameter server resumes from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeps.core.args import check_int, check_params, check_worker_id
from edgeps.core.types import WorkerStats


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
) -> Checkpoint:
    """Version, params shaped as ``current`` and ``worker_stats``, checked before
    any join.

    ``worker_stats`` carry each worker's counters over, so a worker id that
    joins again continues from them; ``joined`` says a worker is live already.
    """
    version = check_int("version", version)
    if joined:
        raise ValueError("restore a checkpoint before workers join")
    if params is not None:
        check_params(params, current.shape)
    carried: dict[str, WorkerStats] = {}
    for wid, stats in (worker_stats or {}).items():
        if not isinstance(stats, WorkerStats):
            raise TypeError(f"stats of {wid!r} must be WorkerStats")
        carried[check_worker_id(wid)] = stats
    return Checkpoint(int(version), params, carried)
