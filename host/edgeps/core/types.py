"""Typed messages between the runtime (or the simulator) and the PS core.

The core never sees bytes, sockets or clocks: the caller decodes a message
into one of these, passes ``now`` in seconds, and carries out the actions it
gets back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class WorkerState(str, Enum):
    JOINING = "joining"
    LIVE = "live"
    SUSPECTED = "suspected"  # silent for a while, still counted
    DEAD = "dead"  # timed out or announced gone; left the barrier


@dataclass(frozen=True)
class Push:
    """One gradient (or delta) pushed by a worker.

    ``clock`` is the number of iterations the worker has completed, this one
    included (the first push carries clock 1). ``seq`` increases strictly per
    worker and incarnation; ``(worker_id, incarnation, seq)`` identifies a push.
    """

    worker_id: str
    clock: int
    seq: int
    base_version: int
    update: np.ndarray  # float32, flat, same length as the parameters
    compute_time: float = 0.0  # seconds the worker spent computing, as it reports
    samples: int = 0
    incarnation: int = 0  # bumped by the worker on each (re)start
    loss: float = float("nan")
    sent_at: float | None = None  # worker's send time if clocks are comparable


@dataclass(frozen=True)
class Release:
    """Send the current parameters (``version``) to these workers: they may go on."""

    worker_ids: tuple[str, ...]
    version: int


@dataclass(frozen=True)
class Applied:
    worker_id: str
    seq: int
    version: int  # parameter version after applying
    staleness: int  # version at apply time minus the push's base_version


@dataclass(frozen=True)
class Rejected:
    worker_id: str
    seq: int
    reason: str  # short stable token: "duplicate", "replay", "unknown_worker", ...


@dataclass(frozen=True)
class Held:
    """The push was handled; the worker waits at the barrier."""

    worker_id: str
    clock: int


@dataclass(frozen=True)
class WorkerLeft:
    worker_id: str
    reason: str  # "timeout", "bye", "last_will"


Action = Release | Applied | Rejected | Held | WorkerLeft


@dataclass
class WorkerStats:
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    max_staleness: int = 0
