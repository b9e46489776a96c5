"""The json-able snapshot of a parameter server, for metrics and dashboards."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.policy_api import Policy
from edgeps.core.registry import WorkerRecord
from edgeps.core.view import ClusterView


class SnapshotSource(Protocol):
    """The public state of a parameter server that its snapshot shows."""

    view: ClusterView
    monitor: PerformanceMonitor
    policy: Policy

    @property
    def version(self) -> int: ...

    max_staleness_seen: int
    forced_releases: int
    rejected_unregistered: dict[str, int]


def server_snapshot(
    ps: SnapshotSource,
    workers: Mapping[str, WorkerRecord],
    now: float,
    *,
    monitor: bool = True,
) -> dict[str, Any]:
    """Version, policy and bound, per-worker state, clock, staleness, class."""
    view = ps.view
    live = view.live_ids()
    top = view.max_live_clock()
    classes = ps.monitor.classes(live)  # one median for all, not one per worker
    rows: dict[str, Any] = {}
    for w, r in workers.items():
        rows[w] = {
            "state": "joining" if r.joining else r.state.value,
            "session": f"{r.session:016x}",
            "clock": r.clock,
            "lag": top - r.clock if r.live else None,
            "waiting": r.waiting,
            "class": classes.get(w) if r.live else None,
            "accepted": r.stats.accepted,
            "rejected": dict(r.stats.rejected),
            "staleness": r.last_staleness,
            "clipped": r.clipped,
            "pulled_in": r.pulled_in,
            "down_weighted": r.down_weighted,
            "max_staleness": r.stats.max_staleness,
            "silent_for": max(0.0, now - r.last_seen),
            "joins": r.joins,
        }
    out = {
        "version": ps.version,
        "policy": ps.policy.describe(),
        "bound": ps.policy.bound_description,
        "n_live": view.n_live,
        "min_clock": view.min_live_clock(),
        "max_clock": top,
        "policy_measure": ps.policy.measure(view),
        "max_staleness_seen": ps.max_staleness_seen,
        "forced_releases": ps.forced_releases,
        "rejected_unregistered": dict(ps.rejected_unregistered),
        "workers": rows,
    }
    centered = getattr(ps, "centered", None)
    if centered is not None:
        out["centered_clip"] = centered.report()
    cap = getattr(ps, "sample_cap", None)
    if cap is not None:
        out["samples_capped"] = cap.capped
    if monitor:
        out["monitor"] = ps.monitor.snapshot()
    return out
