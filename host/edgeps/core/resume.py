"""Resuming a checkpoint into a parameter server before any worker joins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from edgeps.core.args import check_int, check_params, check_worker_id
from edgeps.core.types import WorkerStats

if TYPE_CHECKING:
    from edgeps.core.server import ParameterServer


def resume(
    ps: ParameterServer,
    version: int,
    optimizer_state: dict[str, Any] | None,
    params: np.ndarray | None,
    worker_stats: dict[str, WorkerStats] | None,
) -> None:
    """Version, optimizer state and params; ``worker_stats`` carry each worker's
    counters over, so a worker id that joins again continues from them."""
    version = check_int("version", version)
    if any(r.live for r in ps._workers.values()):
        raise ValueError("restore a checkpoint before workers join")
    if params is not None:
        check_params(params, ps._params.shape)
    if optimizer_state:
        ps.optimizer.load_state_dict(optimizer_state)
    if params is not None:
        ps._params[...] = params
    ps.version = int(version)
    ps._shared = None
    for wid, carried in (worker_stats or {}).items():
        if not isinstance(carried, WorkerStats):
            raise TypeError(f"stats of {wid!r} must be WorkerStats")
        ps._carried_stats[check_worker_id(wid)] = carried
        ps.max_staleness_seen = max(ps.max_staleness_seen, carried.max_staleness)
