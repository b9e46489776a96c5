"""Every event the PS core handles and every action it returns, as typed values.

The core never sees bytes, sockets or clocks: the runtime (or the simulator)
turns a message into one of the events below, passes it with ``now`` in
seconds to ``ParameterServer.handle`` and carries out the actions it gets back
through an ``edgeps.core.sink.ActionSink``. Network input is validated before it
becomes an event (``edgeps.runtime.ingest``), so the core trusts these types.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class WorkerState(str, Enum):
    LIVE = "live"
    SUSPECTED = "suspected"  # silent for a while, still counted
    DEAD = "dead"  # timed out or announced gone; left the barrier


# ---- events ----------------------------------------------------------------


@dataclass(frozen=True)
class Join:
    """A worker says hello: it joins, rejoins after a restart, or asks again.

    ``session`` is the one the PS issues if it accepts this hello (the runtime
    draws it at random; the core never makes one up); a hello naming the
    worker's current ``nonce`` keeps the current session. ``instance`` names
    the worker process (None: the session does, for callers without
    processes); ``nonce`` names its link (0: none).
    """

    worker_id: str
    session: int = 0
    instance: int | None = None
    nonce: int = 0
    max_batch: int = 0  # largest batch the worker takes (0: no cap)


@dataclass(frozen=True)
class Push:
    """One gradient (or delta) pushed by a worker.

    ``clock`` is the number of iterations the worker has completed, this one
    included (the first push carries clock 1). ``seq`` increases per session;
    ``(worker_id, session, seq)`` identifies a push.
    """

    worker_id: str
    clock: int
    seq: int
    base_version: int
    update: np.ndarray  # float32, flat, same length as the parameters
    compute_time: float = 0.0  # seconds the worker spent computing, as it reports
    samples: int = 0
    session: int = 0
    loss: float = float("nan")


@dataclass(frozen=True)
class Heartbeat:
    """A worker is alive (``clock`` is its own count, as it reports it)."""

    worker_id: str
    clock: int = 0
    session: int | None = None  # None: not checked (callers without sessions)


@dataclass(frozen=True)
class Leave:
    """A worker is gone: "bye" (on purpose) or "last_will" (its link dropped).

    ``nonce`` names the link that said so; one that is not the current
    session's has no effect (None: not checked).
    """

    worker_id: str
    reason: str = "bye"
    nonce: int | None = None


@dataclass(frozen=True)
class Tick:
    """Time passed: silent workers are suspected, then timed out.

    ``heard_until``: every message that arrived before this time has been
    handled (None: up to ``now``). The caller's inbox may hold a backlog; a
    worker whose heartbeat waits in it is not silent, so silence is counted
    up to ``heard_until``, not up to ``now``.
    """

    heard_until: float | None = None


Event = Join | Push | Heartbeat | Leave | Tick


# ---- actions ---------------------------------------------------------------

_NO_PARAMS = np.zeros(0, np.float32)
_NO_PARAMS.flags.writeable = False


def _no_params() -> np.ndarray:
    return _NO_PARAMS


@dataclass(frozen=True)
class Release:
    """Send ``params`` (the parameters at ``version``) to these workers: they go on.

    ``params`` is read-only and shared by every release of the same version;
    ``answers[i]`` is the seq of the push that ``worker_ids[i]`` was waiting on,
    or None when its release answers no push (after a join). ``batches`` is
    the batch each released worker should use next, when the PS balances the
    work (None, or a worker missing from it: its own default). Two releases
    are equal when they release the same workers at the same version.
    """

    worker_ids: tuple[str, ...]
    version: int
    params: np.ndarray = field(default_factory=_no_params, compare=False, repr=False)
    answers: tuple[int | None, ...] = field(default=(), compare=False)
    batches: Mapping[str, int] | None = field(default=None, compare=False)

    def targets(self) -> Iterator[tuple[str, int | None]]:
        """(worker id, seq of the push its release answers or None) per worker."""
        answers = self.answers or (None,) * len(self.worker_ids)
        return zip(self.worker_ids, answers, strict=True)


@dataclass(frozen=True)
class Applied:
    worker_id: str
    seq: int
    version: int  # parameter version after applying
    staleness: int  # version at apply time minus the push's base_version


@dataclass(frozen=True)
class Rejected:
    worker_id: str
    seq: int  # of the refused push, 0 for a refused join
    reason: str  # short stable token: "duplicate", "stale_seq", "unknown_worker", ...


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
