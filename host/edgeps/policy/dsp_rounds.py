"""DSP's round barrier: which live workers are computing, and which are late.

When the monitor finds the live boards' speeds close, DSP releases in rounds:
a worker that pushed waits until every live worker still computing is either
done or late (away longer than ``late`` times its typical iteration, which the
round does not wait for). This module keeps that count in O(log N) per event:
the computing workers, a heap of the times at which each turns late, and how
often boards turn late, the share DSP reads to leave rounds when late boards
are common (transient interference, lossy links).
"""

from __future__ import annotations

import bisect
import heapq


class RoundBarrier:
    """Computing live workers and when each turns late; time is passed in.

    A worker released with a typical time T is late ``late`` x T after its
    release. One not yet measured ("blind") is late ``late`` times the
    measured median after its release, a median that moves as others push:
    such workers are kept sorted by release time instead.

    ``late_share`` is an exponentially weighted share of iterations that
    turned late: 1 for each worker when it turns late, 0 for each push on
    time.
    """

    def __init__(self, late: float) -> None:
        self.late = late
        self.late_share = 0.0
        self._computing: dict[str, int] = {}  # worker -> token of its release
        self._heap: list[tuple[float, int, str]] = []  # (deadline, token, worker)
        self._overdue: set[str] = set()  # computing, past their deadline
        self._blind: list[tuple[float, int, str]] = []  # (released, token, worker)
        self._blind_at: dict[str, tuple[float, int, str]] = {}
        self._tokens = 0

    def _note(self, was_late: bool, weight: float) -> None:
        self.late_share += weight * (float(was_late) - self.late_share)

    def started(self, worker_id: str, now: float, typical: float | None) -> None:
        """``worker_id`` was released at ``now`` (``typical``: None if unmeasured)."""
        self.stopped(worker_id)
        self._tokens += 1
        self._computing[worker_id] = self._tokens
        if typical is None:
            entry = (now, self._tokens, worker_id)
            bisect.insort(self._blind, entry)
            self._blind_at[worker_id] = entry
            return
        deadline = now + self.late * typical
        heapq.heappush(self._heap, (deadline, self._tokens, worker_id))
        if len(self._heap) > 4 * len(self._computing) + 64:
            self._heap = [e for e in self._heap if self._current(e)]
            heapq.heapify(self._heap)

    def pushed(self, worker_id: str, weight: float) -> None:
        """``worker_id`` pushed (on time unless it turned late); it waits now."""
        if worker_id not in self._computing:
            return
        if worker_id not in self._overdue:  # a late one was counted when it was
            self._note(False, weight)
        self.stopped(worker_id)

    def stopped(self, worker_id: str) -> None:
        """``worker_id`` is no longer computing (pushed, left, or released again)."""
        self._computing.pop(worker_id, None)
        self._overdue.discard(worker_id)
        entry = self._blind_at.pop(worker_id, None)
        if entry is not None:
            del self._blind[bisect.bisect_left(self._blind, entry)]

    def _current(self, entry: tuple[float, int, str]) -> bool:
        return self._computing.get(entry[2]) == entry[1]

    def pending(self, now: float, fill: float, weight: float) -> int:
        """How many computing workers the round still waits for at ``now``
        (``fill``: the typical time blind workers are judged by)."""
        heap, blind = self._heap, self._blind
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if self._current(entry):
                self._overdue.add(entry[2])
                self._note(True, weight)
        # blind ones by release time: once late, late for this iteration
        while blind and blind[0][0] < now - self.late * fill:
            entry = blind.pop(0)
            del self._blind_at[entry[2]]
            self._overdue.add(entry[2])
            self._note(True, weight)
        return len(self._computing) - len(self._overdue)

    def is_computing(self, worker_id: str) -> bool:
        return worker_id in self._computing
