"""The bounded inbox of received messages that a paho network thread fills."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable


class Inbox:
    """A queue bounded in messages and in payload bytes; ``put`` never blocks.

    It also keeps each queued message's arrival time (``clock``), so the
    taker knows up to when it has heard everything (``oldest_age``).
    One thread puts (the network thread), one takes (the coordinator).

    One lock guards one deque of (topic, payload, arrival): a put and a take
    each hold it once, and a put wakes the taker only when it waits (serve
    takes ~1,000-2,000 messages a second through here).
    """

    def __init__(
        self, size: int, max_bytes: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if size < 1 or max_bytes < 1:
            raise ValueError("queue_size and queue_bytes must be positive")
        self._items: deque[tuple[str, bytes, float]] = deque()
        self._size = size
        self._max_bytes = max_bytes
        self._held = 0
        self._clock = clock
        self._lock = threading.Lock()
        self._cv = threading.Condition(self._lock)  # held through ``_lock``
        self._waiting = 0  # takers blocked in get

    def put(self, item: tuple[str, bytes]) -> bool:
        topic, payload = item
        size = len(payload)
        with self._lock:
            if len(self._items) >= self._size or self._held + size > self._max_bytes:
                return False
            self._items.append((topic, payload, self._clock()))
            self._held += size
            if self._waiting:
                self._cv.notify()
        return True

    def get(self, timeout: float | None) -> tuple[str, bytes] | None:
        """The oldest message; wait up to ``timeout`` s for one (None: no wait)."""
        with self._lock:
            if not self._items:
                if timeout is None or timeout <= 0:
                    return None
                deadline = time.monotonic() + timeout
                self._waiting += 1
                try:
                    while not self._items:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            return None
                        self._cv.wait(left)
                finally:
                    self._waiting -= 1
            topic, payload, _ = self._items.popleft()
            self._held -= len(payload)
        return topic, payload

    def qsize(self) -> int:
        return len(self._items)

    def oldest_age(self) -> float:
        """Seconds the oldest message not yet taken has waited (0.0 if none):
        everything that arrived before then has been taken."""
        with self._lock:
            if not self._items:
                return 0.0
            return max(0.0, self._clock() - self._items[0][2])

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0
