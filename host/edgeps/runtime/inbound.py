"""Serve's inbound path in figures: inbox depth and push-to-release latency.

The coordinator calls `Inbound` at three places: each item ingest returns
(a complete UPDATE is a ``Push``), each Release it publishes, and each tick
(the depth of the MQTT inbox, messages received but not yet handled). The
latency is host-side: from the moment ingest completes an UPDATE to the
moment the Release answering that push is published (time spent waiting in
the inbox before ingest shows as inbox depth, not here). Samples are kept in
bounded windows (the latest ``window`` of each), so a long run costs fixed
memory; `report()` gives percentiles over that window.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from edgeps.core.types import Push, Release

WINDOW = 1 << 16  # samples kept of each kind


def percentiles(values: Any, qs: tuple[float, ...]) -> list[float | None]:
    """The ``qs`` percentiles (0..100) of ``values``, None when there are none."""
    arr = np.fromiter(values, dtype=np.float64)
    if arr.size == 0:
        return [None for _ in qs]
    return [float(v) for v in np.percentile(arr, qs)]


class Inbound:
    """Inbox depth samples and push-to-release latencies of one serve run."""

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError("window must be >= 1")
        self.depths: deque[int] = deque(maxlen=window)
        self.latencies: deque[float] = deque(maxlen=window)
        self.depth_max = 0
        self.pushes = 0
        self.answered = 0
        self._pushed: dict[str, float] = {}  # worker -> when its push completed

    def feed(self, item: object, now: float) -> None:
        """An item ingest returned: a Push starts that worker's latency clock."""
        if isinstance(item, Push):
            self.pushes += 1
            self._pushed[item.worker_id] = now

    def released(self, action: Release, now: float) -> None:
        """A Release was published: it answers the pushes it names."""
        for wid, seq in action.targets():
            start = self._pushed.pop(wid, None)
            if start is not None and seq is not None:
                self.answered += 1
                self.latencies.append(max(0.0, now - start))

    def sample(self, link: object) -> None:
        """One sample of the link's inbox depth (a link without one is skipped)."""
        inbox = getattr(link, "inbox", None)
        qsize = getattr(inbox, "qsize", None)
        if qsize is None:
            return
        depth = int(qsize())
        self.depths.append(depth)
        self.depth_max = max(self.depth_max, depth)

    def report(self) -> dict[str, Any]:
        """The figures for the run summary and /metrics (milliseconds, messages)."""
        p50, p95, p99 = percentiles(self.latencies, (50.0, 95.0, 99.0))
        (d99,) = percentiles(self.depths, (99.0,))

        def ms(v: float | None) -> float | None:
            return None if v is None else round(1000.0 * v, 3)

        return {
            "inbox_depth_samples": len(self.depths),
            "inbox_depth_p99": d99,
            "inbox_depth_max": self.depth_max,
            "pushes": self.pushes,
            "push_to_release_n": len(self.latencies),
            "push_to_release_ms_p50": ms(p50),
            "push_to_release_ms_p95": ms(p95),
            "push_to_release_ms_p99": ms(p99),
        }
