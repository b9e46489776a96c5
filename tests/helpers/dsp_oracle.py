"""DSP's normalised progress recomputed from the events a test saw.

An oracle independent of the policy's bookkeeping: it follows the rule as
``edgeps.policy.dsp.DSP``'s docstring states it, from what the test itself
observed (joins, releases, applied pushes, departures). The only thing it reads
from the server is the monitor's typical iteration times, DSP's input, which
``tests/core/test_monitor.py`` checks on its own.
"""

from __future__ import annotations

import math

from edgeps.core.monitor import PerformanceMonitor


class ProgressOracle:
    """P_i per live worker, with the release times and waiting set that drive it."""

    def __init__(
        self, monitor: PerformanceMonitor, w: float, grace: float, spike: float
    ):
        self.monitor = monitor
        self.w, self.grace, self.spike = w, grace, spike
        self.progress: dict[str, float] = {}
        self.released_at: dict[str, float] = {}
        self.waiting: set[str] = set()

    def times(self) -> dict[str, float]:
        """Typical iteration time per live worker; the median fills unmeasured ones."""
        raw = {w: self.monitor.typical_iteration(w) for w in self.progress}
        known = sorted(t for t in raw.values() if math.isfinite(t) and t > 0)
        fill = known[len(known) // 2] if known else 1.0
        return {w: t if math.isfinite(t) and t > 0 else fill for w, t in raw.items()}

    def owed(self, wid: str, now: float, t: float, t_max: float) -> float:
        """Credit for an iteration running far past the worker's typical time."""
        away = now - self.released_at[wid]
        if self.grace <= 0 or away <= self.spike * t:
            return 0.0
        return min(self.grace, (away - t) / t_max)

    # -- events ----------------------------------------------------------------
    def joined(self, wid: str, now: float) -> None:
        """A new life: it starts at the smallest progress of the other live workers."""
        self.left(wid)
        others = list(self.progress.values())
        self.progress[wid] = min(others) if others else 0.0
        self.released_at[wid] = now

    def left(self, wid: str) -> None:
        self.progress.pop(wid, None)
        self.waiting.discard(wid)

    def applied(self, wid: str, now: float) -> None:
        times = self.times()
        t, t_max = times[wid], max(times.values())
        self.progress[wid] += t / t_max + self.owed(wid, now, t, t_max)
        self.waiting.add(wid)

    def released(self, worker_ids: tuple[str, ...], now: float) -> list[str]:
        """Note a release; return the released waiters that break the rule."""
        times = self.times()
        t_max = max(times.values(), default=1.0)
        floor = math.inf
        for j, p in self.progress.items():
            # when the core judges, every worker it names is waiting or was
            # released at ``now`` (a join, a repeated hello, a resync): no credit
            idle = j in self.waiting or j in worker_ids
            credit = 0.0 if idle else self.owed(j, now, times[j], t_max)
            floor = min(floor, p + credit)
        broken = [
            wid
            for wid in worker_ids
            if wid in self.waiting and self.progress[wid] > floor + self.w + 1e-9
        ]
        for wid in worker_ids:
            self.released_at[wid] = now
            self.waiting.discard(wid)
        return broken

    def spread(self) -> float:
        ps = list(self.progress.values())
        return max(ps) - min(ps) if ps else 0.0
