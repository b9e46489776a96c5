"""The latest state of a run, handed over by the coordinator, read by HTTP threads.

The coordinator calls `publish` once per metrics snapshot: it only swaps a
reference and appends to a bounded history under a lock held for a few
microseconds, so the training loop never waits on a slow dashboard client.
Readers get the same record object, which the coordinator never mutates after
publishing (it builds a fresh one each time).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

HISTORY = 3600  # points of the accuracy curve kept (an hour at one per second)


class LatestState:
    """Thread-safe holder of the newest metrics record and the accuracy history."""

    def __init__(self, history: int = HISTORY) -> None:
        if history < 1:
            raise ValueError(f"history must be >= 1, got {history}")
        self._lock = threading.Lock()
        self._record: dict[str, Any] | None = None
        self._history: deque[tuple[float, float | None, float]] = deque(maxlen=history)
        self.published = 0

    def publish(self, record: dict[str, Any]) -> None:
        """Make ``record`` the latest (called from the coordinator thread)."""
        point = (
            float(record.get("elapsed", 0.0)),
            record.get("accuracy"),
            float(record.get("updates_per_s", 0.0)),
        )
        with self._lock:
            self._record = record
            self._history.append(point)
            self.published += 1

    def finish(self, state: str = "done") -> None:
        """The job is over: the latest record says ``state``, not "learning"
        (a dashboard that lingers after the run shows the final record)."""
        with self._lock:
            if self._record is not None:
                self._record = {**self._record, "state": state}

    def latest(self) -> dict[str, Any] | None:
        """The newest record (shared: do not mutate), or None before the first."""
        with self._lock:
            return self._record

    def view(self) -> dict[str, Any]:
        """What `/api/state` serves: the latest record plus the accuracy history."""
        with self._lock:
            record = self._record
            history = list(self._history)
        out: dict[str, Any] = dict(record) if record is not None else {"workers": {}}
        out["ready"] = record is not None
        out["history"] = [
            {"elapsed": t, "accuracy": a, "updates_per_s": r} for t, a, r in history
        ]
        return out
