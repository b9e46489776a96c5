"""Bounded admission: how many worker ids the PS keeps, and when one holds a barrier.

Anyone who can publish on the broker can say HELLO with a made-up worker id.
Two rules keep that from costing the job memory, CPU or progress:

- A newcomer can be *joining* (``WorkerRecord.joining``: alive, in state
  ``LIVE``, but not admitted): it is released with the current parameters
  like any worker, but it is not in the live set, so no barrier waits for it
  and no policy sees it. Its first push (any push that takes a turn) enters
  it into the live set, level with the slowest live worker, and from then on
  it counts like every other worker. A joining id silent for the liveness
  timeout is forgotten; one that says BYE is dead.
- The registry is bounded: at most ``max_joining`` joining ids (a new one
  evicts the oldest joining) and at most ``max_records`` records in all (a
  new one evicts the oldest joining, else the longest dead; a live worker is
  never evicted, and a HELLO that finds only live ones is refused as
  ``admission_full``).

``on_first_push=False`` keeps the older rule (a newcomer holds the barrier
from its join), which the simulator and benchmarks of honest workers use; the
MQTT runtime, reachable by anyone on the broker, admits on the first push.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from edgeps.core.registry import WorkerRecord


@dataclass(frozen=True)
class Admission:
    """Bounds on the worker registry and when a newcomer starts to count."""

    on_first_push: bool = False
    max_joining: int = 1024
    max_records: int = 16384

    def __post_init__(self) -> None:
        for name in ("max_joining", "max_records"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")


class Registry(dict[str, WorkerRecord]):
    """The PS's worker records by id, bounded by an ``Admission``.

    It knows which ids may be evicted: joining ones by join, dead ones by
    death, in insertion-ordered dicts, so the oldest of each is found in O(1)
    and an id moves between them in O(1). A live worker is never evicted.
    ``take_forgotten`` gives the ids forgotten since it was last called
    (bounded: a caller that never asks loses the oldest names, never memory).
    """

    def __init__(self, limits: Admission) -> None:
        super().__init__()
        self.limits = limits
        self._joining: dict[str, None] = {}
        self._dead: dict[str, None] = {}
        self._forgotten: deque[str] = deque(maxlen=1 << 16)
        self.forgotten_total = 0
        self._next_order = 0  # registry order: release passes go in it

    def new(self, worker_id: str, session: int, instance: int) -> WorkerRecord | None:
        """A record for a new id, after evicting what it needs; None: only live
        workers could make room."""
        if len(self._joining) >= self.limits.max_joining:
            self.forget(next(iter(self._joining)))
        while len(self) >= self.limits.max_records:
            victim = next(iter(self._joining), None) or next(iter(self._dead), None)
            if victim is None:
                return None
            self.forget(victim)
        rec = WorkerRecord(worker_id, session, instance, self._next_order)
        self._next_order += 1
        self[worker_id] = rec
        return rec

    def forget(self, worker_id: str) -> None:
        """Drop a joining or dead record: its id becomes unknown again."""
        if self.pop(worker_id, None) is not None:
            self._joining.pop(worker_id, None)
            self._dead.pop(worker_id, None)
            self._forgotten.append(worker_id)
            self.forgotten_total += 1

    def note_joining(self, wid: str) -> None:
        self._dead.pop(wid, None)
        self._joining[wid] = None

    def note_live(self, wid: str) -> None:
        self._dead.pop(wid, None)
        self._joining.pop(wid, None)

    def note_dead(self, wid: str) -> None:
        self._joining.pop(wid, None)
        self._dead[wid] = None

    def take_forgotten(self) -> list[str]:
        out = list(self._forgotten)
        self._forgotten.clear()
        return out
