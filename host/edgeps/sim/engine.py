"""A minimal discrete-event engine: a heap of timestamped callbacks in virtual time."""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

Handler = Callable[..., None]
# (time, seq, handler, args): ties run in scheduling order (seq is unique, so
# handlers are never compared), and tuples compare in C, which matters with
# thousands of workers
_Event = tuple[float, int, Handler, tuple[Any, ...]]


class EventLoop:
    """Runs callbacks in time order; ``now`` only moves forward."""

    def __init__(self) -> None:
        self._heap: list[_Event] = []
        self._seq = 0
        self.now = 0.0
        self.processed = 0
        self.stopped = False

    def at(self, time: float, handler: Handler, *args: Any) -> None:
        """Schedule ``handler(*args)`` at virtual ``time`` (not before ``now``)."""
        if not math.isfinite(time):
            raise ValueError(f"event time must be finite, got {time!r}")
        self._seq += 1
        heapq.heappush(self._heap, (max(time, self.now), self._seq, handler, args))

    def after(self, delay: float, handler: Handler, *args: Any) -> None:
        """Schedule ``handler(*args)`` ``delay`` seconds from now."""
        if not delay >= 0:
            raise ValueError(f"delay must be >= 0, got {delay!r}")
        self.at(self.now + delay, handler, *args)

    def run_until(self, end: float, *, max_events: int = 10_000_000) -> None:
        """Process events up to and including time ``end``, at most ``max_events``."""
        budget = max_events
        heap = self._heap
        while heap and heap[0][0] <= end and not self.stopped:
            if budget <= 0:
                raise RuntimeError(
                    f"event budget of {max_events} exhausted at t={self.now}"
                )
            budget -= 1
            time, _, handler, args = heapq.heappop(heap)
            self.now = time
            self.processed += 1
            handler(*args)
        self.now = max(self.now, end)

    def stop(self) -> None:
        """End the run: ``run_until`` processes no further event, even one added now."""
        self.stopped = True

    def __len__(self) -> int:
        return len(self._heap)
