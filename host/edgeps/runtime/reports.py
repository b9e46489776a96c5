"""What serve reports of a run: per-worker rows and the drop counters.

Pure functions of the server, the accounting and the link, shared by the
metrics records and the final summary, and those two built from a
``Coordinator``'s state (``record``, ``summary``).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from edgeps.core.server import ParameterServer
from edgeps.model import architecture
from edgeps.observe.fields import add_run_fields
from edgeps.runtime.accounting import Accounting
from edgeps.runtime.ingest import Ingest
from edgeps.runtime.summary import Summary
from edgeps.runtime.worker_rows import limit_rows

if TYPE_CHECKING:
    from edgeps.runtime.coordinator import Coordinator


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


def model_info(text: str) -> dict[str, Any]:
    """The job's architecture, parameters and MACs; empty if the spec does not parse."""
    try:
        return architecture.describe(text)
    except (ValueError, TypeError):
        return {}


def record(c: Coordinator, now: float, rate: float) -> dict[str, Any]:
    """One metrics snapshot of coordinator ``c`` at ``rate`` applied updates a
    second (what the progress display shows, the metrics file holds and the
    dashboard draws)."""
    rows, omitted = limit_rows(c.worker_rows(now), c.settings.max_worker_rows)
    record = {
        "time": round(time.time(), 3),  # wall clock, for joining with other logs
        "elapsed": round(c.elapsed(now), 3),
        "version": int(c.server.version),
        "accuracy": c.accuracy,
        "state": c.watch.state,
        "step_scale": c.watch.step_scale,
        "updates": c.applied,
        "updates_per_s": rate,
        "max_staleness": c.server.max_staleness_seen,
        "workers": rows,
        "workers_omitted": omitted,
        "workers_forgotten": c.server.forgotten_total,
        "dropped": c.dropped(),
        "unknown": c.unknown(),
        "broker": c.broker_report(),
        "inbound": c.inbound.report(),
        "model": model_info(c.settings.model),
    }
    if c.gate is not None:
        record["scaler"] = c.gate.report()
    if c.privacy is not None and c.server.model.dp is not None:
        record["privacy"] = c.privacy.report(c.server.model.dp)
    return add_run_fields(
        record,
        job=c.settings.job,
        policy=c.policy_name,
        server=c.server,
        link=c.link,
        staleness_counts=c.staleness_counts,
    )


def summary(c: Coordinator, reason: str, now: float) -> Summary:
    """The run's summary once coordinator ``c`` has finished (``reason``)."""
    elapsed = c.elapsed(now)
    rows, omitted = limit_rows(c.worker_rows(now), c.settings.max_worker_rows)
    acc = c.accuracy
    return Summary(
        policy=c.policy_name,
        stop_reason=reason,
        elapsed=elapsed,
        version=int(c.server.version),
        accuracy=None if acc is None or not math.isfinite(acc) else acc,
        updates=c.applied,
        updates_per_s=c.applied / elapsed if elapsed > 0 else 0.0,
        max_staleness=c.server.max_staleness_seen,
        workers=rows,
        workers_omitted=omitted,
        workers_forgotten=c.server.forgotten_total,
        dropped=c.dropped(),
        unknown=c.unknown(),
        broker=c.broker_report(),
        releases=c.outbox.stats(),
        inbound=c.inbound.report(),
        checkpoints=c.checkpoints.report(),
        first_update=(
            None if c.first_applied_at is None else c.elapsed(c.first_applied_at)
        ),
        state=c.watch.state,
        advice=c.watch.advice(c.server.model.lr),
        privacy=(
            c.privacy.report(c.server.model.dp)
            if c.privacy is not None and c.server.model.dp is not None
            else {}
        ),
        model=model_info(c.settings.model),
    )
