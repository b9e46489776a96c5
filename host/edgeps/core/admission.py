"""Bounded admission: how many worker ids the PS keeps, and when one holds a barrier.

Anyone who can publish on the broker can say HELLO with a made-up worker id.
Two rules keep that from costing the job memory, CPU or progress:

- A newcomer can be *joining* (``WorkerRecord.joining``: alive, in state
  ``LIVE``, but not admitted): it is released with the current parameters
  like any worker, but it is not in the live set, so
  no barrier waits for it and no policy sees it. Its first push (any push that
  takes a turn) enters it into the live set, level with the slowest live
  worker, and from then on it counts like every other worker. A joining id
  silent for the liveness timeout is forgotten; one that says BYE is dead.
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


class Roster:
    """The ids that may be evicted: joining ones by join, dead ones by death.

    Insertion-ordered dicts, so the oldest of each is found in O(1) and an id
    moves between them in O(1). ``forgotten`` keeps the ids forgotten since
    the runtime last took them (bounded: a caller that never takes them loses
    the oldest names, never memory).
    """

    def __init__(self) -> None:
        self.joining: dict[str, None] = {}
        self.dead: dict[str, None] = {}
        self.forgotten: deque[str] = deque(maxlen=1 << 16)
        self.forgotten_total = 0

    def note_joining(self, wid: str) -> None:
        self.dead.pop(wid, None)
        self.joining[wid] = None

    def note_live(self, wid: str) -> None:
        self.dead.pop(wid, None)
        self.joining.pop(wid, None)

    def note_dead(self, wid: str) -> None:
        self.joining.pop(wid, None)
        self.dead[wid] = None

    def note_forgotten(self, wid: str) -> None:
        self.joining.pop(wid, None)
        self.dead.pop(wid, None)
        self.forgotten.append(wid)
        self.forgotten_total += 1

    def oldest_joining(self) -> str | None:
        return next(iter(self.joining), None)

    def evictable(self) -> str | None:
        """The record to give up for a newcomer: the oldest joining, else dead."""
        return next(iter(self.joining), None) or next(iter(self.dead), None)

    def take_forgotten(self) -> list[str]:
        out = list(self.forgotten)
        self.forgotten.clear()
        return out
