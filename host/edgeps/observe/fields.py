"""What the coordinator adds to each metrics snapshot so that a run can be drawn.

The base snapshot (`Coordinator.record`) has accuracy, rates and per-worker
clocks and counters. Plots and the dashboard also need the policy and its
bound, each worker's typical compute and communication time (from the
performance monitor), the staleness of every applied update (as counts) and
the depth of the MQTT inbox. All of it is already known to the coordinator.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _seconds(value: Any) -> float | None:
    return None if value is None else round(float(value), 6)


def add_run_fields(
    record: dict[str, Any],
    *,
    job: str,
    policy: str,
    server: Any,
    link: Any,
    staleness_counts: Mapping[int, int],
) -> dict[str, Any]:
    """Fill ``record`` in place (and return it) with the fields listed above."""
    record["job"] = job
    record["policy"] = policy
    pol = getattr(server, "policy", None)
    record["bound"] = str(getattr(pol, "bound_description", "")) if pol else ""
    inbox = getattr(link, "inbox", None)
    record["inbox_depth"] = int(inbox.qsize()) if inbox is not None else 0
    record["staleness_counts"] = {
        str(k): int(v) for k, v in sorted(staleness_counts.items())
    }
    monitor = getattr(server, "monitor", None)
    times = monitor.snapshot().get("workers", {}) if monitor is not None else {}
    for wid, row in record.get("workers", {}).items():
        t = times.get(wid, {})
        row["compute_s"] = _seconds(t.get("compute_mean"))
        row["comm_s"] = _seconds(t.get("comm_mean"))
        row["iteration_s"] = _seconds(t.get("iteration_mean"))
    return record
