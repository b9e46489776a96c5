"""Pure scheduling of the event-loop emulator: timers and held publishes.

Nothing here reads a clock: every method takes ``now`` (seconds), so the
loop's scheduling is tested with fake time.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field


class Timers:
    """A heap of callbacks due at given times; equal times run in call order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Callable[[], object]]] = []
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def at(self, when: float, fn: Callable[[], object]) -> None:
        heapq.heappush(self._heap, (when, next(self._seq), fn))

    def next_at(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Callable[[], object]]:
        """Remove and return, in time order, every callback due at ``now``."""
        due = []
        while self._heap and self._heap[0][0] <= now:
            due.append(heapq.heappop(self._heap)[2])
        return due

    def run_due(self, now: float) -> int:
        fns = self.pop_due(now)
        for fn in fns:
            fn()
        return len(fns)


@dataclass
class Held:
    """One publish waiting for its time: after the compute and the link delay."""

    at: float
    topic: str
    payload: bytes
    qos: int
    retain: bool


@dataclass
class SendQueue:
    """Publishes of one sensor, in order, each at max(hold, now + delay).

    ``hold(until)`` says the sensor computes until then (a board cannot send
    while it computes); ``add`` gives the time a publish is due. A publish
    never overtakes an earlier one (one TCP stream), so due times only grow.
    """

    hold_until: float = 0.0
    last_at: float = 0.0
    items: deque[Held] = field(default_factory=deque)

    def busy(self, now: float) -> bool:
        return now < self.hold_until

    def hold(self, until: float) -> None:
        self.hold_until = max(self.hold_until, until)

    def add(
        self, now: float, delay: float, topic: str, payload: bytes, qos: int, r: bool
    ) -> float | None:
        """Queue a publish; return its due time, or None if it may go now."""
        at = max(now, self.hold_until) + max(0.0, delay)
        at = max(at, self.last_at)
        self.last_at = at
        if at <= now and not self.items:
            return None
        self.items.append(Held(at, topic, bytes(payload), qos, r))
        return at

    def pop_due(self, now: float) -> list[Held]:
        out = []
        while self.items and self.items[0].at <= now:
            out.append(self.items.popleft())
        return out

    def clear(self) -> None:
        self.items.clear()
        self.hold_until = 0.0
        self.last_at = 0.0


def paced_rest(rest: float, started: float, arrived: float) -> float:
    """What a paced sensor sleeps: the step's ``rest`` less the time its
    message waited (``arrived`` to ``started``) for the emulator to get to it.

    On a board, a step starts when its release arrives; on a loop with a
    thousand sensors, a release read in one select waits behind the others
    read with it. Pacing counts that wait in the step, so each step ends its
    drawn time after its release arrived (never before the real gradient is
    done: the rest is at least 0).
    """
    return max(0.0, rest - max(0.0, started - arrived))


def spread(n: int, start: float, span: float) -> list[float]:
    """``n`` start times evenly over ``span`` seconds from ``start`` (a ramp)."""
    if n <= 0:
        return []
    step = span / n if span > 0 else 0.0
    return [start + i * step for i in range(n)]
