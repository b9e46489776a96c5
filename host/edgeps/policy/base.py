"""The sync-policy interface and the read-only cluster view the PS core gives it.

A policy answers two questions for the core: may this push be applied
(``admit``), and may this waiting worker start its next iteration now
(``may_proceed``). The core asks ``may_proceed`` for every waiting worker after
every event, so a policy never has to remember whom to wake.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.registry import WorkerRecord
from edgeps.core.types import Push, WorkerState


@dataclass(frozen=True)
class WorkerInfo:
    """A frozen copy of one worker's PS-side state."""

    worker_id: str
    state: WorkerState
    incarnation: int
    clock: int
    waiting: bool
    released_at: float
    last_push_at: float | None


class ClusterView:
    """Read-only view of the live cluster, built by the core over its registry.

    Clocks are PS-side: the number of pushes applied for a worker, offset at
    (re)join to the slowest live worker's clock. Only live workers (``LIVE`` or
    ``SUSPECTED``) count for the barrier; dead ones are invisible here.
    """

    def __init__(
        self,
        workers: Mapping[str, WorkerRecord],
        monitor: PerformanceMonitor,
        version_of: Callable[[], int],
    ) -> None:
        self._workers = workers
        self.monitor = monitor
        self._version_of = version_of
        self._cached: tuple[int, int, int] | None = None  # (n_live, min, max)
        self._cached_live: list[str] | None = None
        self.floor = 0  # last known minimum live clock, used when nobody is live

    @property
    def version(self) -> int:
        return self._version_of()

    def freeze_clocks(self) -> None:
        """Cache the live set and its min/max clocks during a release pass."""
        self._cached = None
        self._cached_live = None
        self._cached = self._aggregate()
        self._cached_live = self.live_ids()

    def thaw_clocks(self) -> None:
        self._cached = None
        self._cached_live = None

    def _aggregate(self) -> tuple[int, int, int]:
        if self._cached is not None:
            return self._cached
        clocks = [r.clock for r in self._workers.values() if r.live]
        if not clocks:
            return 0, self.floor, self.floor
        return len(clocks), min(clocks), max(clocks)

    def live_ids(self) -> list[str]:
        if self._cached_live is not None:
            return list(self._cached_live)
        return [w for w, r in self._workers.items() if r.live]

    def waiting_ids(self) -> list[str]:
        return [w for w, r in self._workers.items() if r.live and r.waiting]

    @property
    def n_live(self) -> int:
        return self._aggregate()[0]

    def min_live_clock(self) -> int:
        """Smallest clock among live workers (the last known one if none is live)."""
        return self._aggregate()[1]

    def max_live_clock(self) -> int:
        return self._aggregate()[2]

    def is_live(self, worker_id: str) -> bool:
        r = self._workers.get(worker_id)
        return r is not None and r.live

    def clock(self, worker_id: str) -> int:
        return self._workers[worker_id].clock

    def is_waiting(self, worker_id: str) -> bool:
        return self._workers[worker_id].waiting

    def incarnation(self, worker_id: str) -> int:
        return self._workers[worker_id].incarnation

    def last_push_at(self, worker_id: str) -> float | None:
        return self._workers[worker_id].last_push_at

    def released_at(self, worker_id: str) -> float:
        return self._workers[worker_id].released_at

    def worker(self, worker_id: str) -> WorkerInfo:
        r = self._workers[worker_id]
        return WorkerInfo(
            r.worker_id,
            r.state,
            r.incarnation,
            r.clock,
            r.waiting,
            r.released_at,
            r.last_push_at,
        )

    def predicted_push_at(self, worker_id: str) -> float:
        """When this worker's next push should arrive (NaN if the monitor lacks data).

        A waiting worker has no next push until released; its prediction is inf.
        """
        r = self._workers[worker_id]
        if r.waiting:
            return math.inf
        typical = self.monitor.typical_iteration(worker_id)
        if math.isnan(typical):
            return math.nan
        return r.released_at + typical


class Policy(ABC):
    """Base of every sync policy: one rule, one bound, hooks the core calls.

    ``bound`` is the policy's staleness bound in its own units (None if it has
    none) and ``measure(view)`` the current value of that quantity; the core's
    tests check ``measure(view) <= bound`` after every event.
    """

    name: str = "policy"

    @property
    @abstractmethod
    def bound_description(self) -> str:
        """Human-readable statement of the bound this policy keeps."""

    @property
    def bound(self) -> float | None:
        return None

    def measure(self, view: ClusterView) -> float:
        """Current value of the bounded quantity (default: live clock spread)."""
        return float(view.max_live_clock() - view.min_live_clock())

    def admit(self, view: ClusterView, push: Push, now: float) -> str | None:
        """A reason to drop this push (e.g. "too_stale"), or None to apply it."""
        return None

    @abstractmethod
    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        """May this waiting worker start its next iteration now?"""

    def on_applied(self, view: ClusterView, push: Push, now: float) -> None:
        """Called after a push is applied and the pusher's clock advanced."""
        return None

    def on_left(self, view: ClusterView, worker_id: str, now: float) -> None:
        """Called after a worker left the live set (bye, last will, timeout)."""
        return None

    def on_joined(self, view: ClusterView, worker_id: str, now: float) -> None:
        """Called after a worker (re)joined, before it is released."""
        return None

    def on_released(self, view: ClusterView, worker_id: str, now: float) -> None:
        """Called when the core releases a worker (it starts a new iteration)."""
        return None

    def refresh(self, view: ClusterView, now: float) -> None:
        """Called once before each release pass (e.g. to close rounds)."""
        return None

    def describe(self) -> str:
        """Compact text form that ``parse_policy`` accepts."""
        return self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"
