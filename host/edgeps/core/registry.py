"""Worker registry of the PS: identity, liveness, clock and exactly-once state."""

from __future__ import annotations

from dataclasses import dataclass, field

from edgeps.core.types import WorkerState, WorkerStats


@dataclass
class WorkerRecord:
    """What the PS knows about one worker; mutated only by the server.

    ``clock`` is the PS's count of this worker's applied pushes, offset at
    (re)join so that a newcomer starts level with the slowest live worker
    instead of dragging the barrier back to zero. ``last_seq`` is the highest
    sequence number handled for ``incarnation`` (applied or dropped), so a
    redelivery of any handled push is recognised.
    """

    worker_id: str
    incarnation: int
    state: WorkerState = WorkerState.LIVE
    clock: int = 0
    last_seq: int = -1
    last_push_clock: int = 0  # the worker's own clock of its last handled push
    waiting: bool = False
    joined_at: float = 0.0
    last_seen: float = 0.0
    released_at: float = 0.0
    last_push_at: float | None = None
    joins: int = 0
    stats: WorkerStats = field(default_factory=WorkerStats)

    @property
    def live(self) -> bool:
        return self.state in (WorkerState.LIVE, WorkerState.SUSPECTED)

    def count_rejection(self, reason: str) -> None:
        self.stats.rejected[reason] = self.stats.rejected.get(reason, 0) + 1
