"""What serve reports of a run: per-worker rows and the drop counters.

Pure functions of the server, the accounting and the link, shared by the
metrics records and the final summary (``edgeps.runtime.coordinator``).
"""

from __future__ import annotations

from typing import Any

from edgeps.core.server import ParameterServer
from edgeps.runtime.accounting import Accounting
from edgeps.runtime.ingest import Ingest


def dropped(ingest: Ingest, link: Any) -> dict[str, int]:
    """Messages dropped by reason, including those the full inbox lost."""
    out = dict(ingest.dropped)
    lost = int(getattr(link, "dropped", 0))
    if lost:
        out["inbox_full"] = lost
    return out


def broker(accounting: Accounting, link: Any) -> dict[str, Any]:
    """The broker's $SYS drop/queue counters and serve's inbox overflow."""
    refused = list(getattr(link, "refused", []))
    return accounting.broker(refused, int(getattr(link, "dropped", 0)))


def worker_rows(
    server: ParameterServer, accounting: Accounting, now: float
) -> dict[str, dict[str, Any]]:
    """Per worker: clock, staleness, state, straggler class, accepted/rejected."""
    raw = server.snapshot(now, monitor=False)["workers"]
    stats = server.stats()
    rows: dict[str, dict[str, Any]] = {}
    charged, drops = accounting.rejected, accounting.dropped
    for wid in sorted(raw.keys() | stats.keys()):
        w, s = raw.get(wid, {}), stats.get(wid)
        rej = dict(s.rejected) if s is not None else {}
        for reason, n in charged.get(wid, {}).items():  # most workers: none
            rej[reason] = rej.get(reason, 0) + n
        dropped = dict(drops.get(wid, {}))
        rows[wid] = {
            "clock": w.get("clock", 0),
            "staleness": w.get("lag") or 0,  # clocks behind the fastest
            "state": w.get("state", "?"),
            "class": w.get("class") or "-",
            "waiting": w.get("waiting", False),
            "accepted": s.accepted if s is not None else 0,
            "rejected": sum(rej.values()),
            "rejected_by_reason": dict(sorted(rej.items())),
            "dropped": sum(dropped.values()),
            "dropped_by_reason": dropped,
            "max_staleness": s.max_staleness if s is not None else 0,
            "clipped": w.get("clipped", 0),
        }
    return rows
