"""The bounded inbox of received messages that a paho network thread fills."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable


class Inbox:
    """A queue bounded in messages and in payload bytes; ``put`` never blocks.

    It also keeps each queued message's arrival time (``clock``), so the
    taker knows up to when it has heard everything (``oldest_age``).
    One thread puts (the network thread), one takes (the coordinator).
    """

    def __init__(
        self, size: int, max_bytes: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if size < 1 or max_bytes < 1:
            raise ValueError("queue_size and queue_bytes must be positive")
        self._q: queue.Queue[tuple[str, bytes]] = queue.Queue(maxsize=size)
        self._max_bytes = max_bytes
        self._held = 0
        self._arrived: deque[float] = deque()  # arrival times, oldest first
        self._clock = clock
        self._lock = threading.Lock()

    def put(self, item: tuple[str, bytes]) -> bool:
        size = len(item[1])
        with self._lock:
            if self._held + size > self._max_bytes:
                return False
            try:
                self._q.put_nowait(item)
            except queue.Full:
                return False
            self._held += size
            # under the lock with the put: a taker's ``get`` pops it after
            self._arrived.append(self._clock())
        return True

    def get(self, timeout: float | None) -> tuple[str, bytes] | None:
        try:
            item = (
                self._q.get_nowait() if timeout is None else self._q.get(True, timeout)
            )
        except queue.Empty:
            return None
        with self._lock:
            self._held -= len(item[1])
            if self._arrived:
                self._arrived.popleft()
        return item

    def qsize(self) -> int:
        return self._q.qsize()

    def oldest_age(self) -> float:
        """Seconds the oldest message not yet taken has waited (0.0 if none):
        everything that arrived before then has been taken."""
        with self._lock:
            if not self._arrived:
                return 0.0
            return max(0.0, self._clock() - self._arrived[0])

    def clear(self) -> None:
        while self.get(None) is not None:
            pass
