"""A minimal discrete-event engine: a heap of timestamped callbacks in virtual time."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Handler = Callable[..., None]


@dataclass(order=True)
class _Event:
    time: float
    seq: int  # ties run in scheduling order, so a run is repeatable
    handler: Handler = field(compare=False)
    args: tuple[Any, ...] = field(compare=False)


class EventLoop:
    """Runs callbacks in time order; ``now`` only moves forward."""

    def __init__(self) -> None:
        self._heap: list[_Event] = []
        self._seq = 0
        self.now = 0.0
        self.processed = 0

    def at(self, time: float, handler: Handler, *args: Any) -> None:
        """Schedule ``handler(*args)`` at virtual ``time`` (not before ``now``)."""
        if not math.isfinite(time):
            raise ValueError(f"event time must be finite, got {time!r}")
        self._seq += 1
        heapq.heappush(
            self._heap, _Event(max(time, self.now), self._seq, handler, args)
        )

    def after(self, delay: float, handler: Handler, *args: Any) -> None:
        """Schedule ``handler(*args)`` ``delay`` seconds from now."""
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0, got {delay!r}")
        self.at(self.now + delay, handler, *args)

    def run_until(self, end: float, *, max_events: int = 10_000_000) -> None:
        """Process events up to and including time ``end``, at most ``max_events``."""
        budget = max_events
        while self._heap and self._heap[0].time <= end:
            if budget <= 0:
                raise RuntimeError(
                    f"event budget of {max_events} exhausted at t={self.now}"
                )
            budget -= 1
            ev = heapq.heappop(self._heap)
            self.now = ev.time
            self.processed += 1
            ev.handler(*ev.args)
        self.now = max(self.now, end)

    def __len__(self) -> int:
        return len(self._heap)
