"""At most N per-worker rows in a metrics record or a summary; the rest as one line.

A job's records and summary list each worker, but a flood of made-up ids (or a
very large fleet) must not make each metrics record megabytes long. The rows
kept are the live workers first, then the dead, then ids that joined and never
pushed, each group by id; the others are folded into ``workers_omitted``: how
many, by state, and their summed counters.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

MAX_WORKER_ROWS = 256  # per metrics record and summary

# live first: they are the job; ids that never pushed last
_RANK = {"live": 0, "suspected": 0, "dead": 1, "joining": 2}


def limit_rows(
    rows: dict[str, dict[str, Any]], limit: int = MAX_WORKER_ROWS
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """(at most ``limit`` rows, the aggregate of the omitted ones)."""
    if len(rows) <= limit:
        return rows, omitted_of([])
    order = sorted(rows, key=lambda w: (_RANK.get(str(rows[w].get("state")), 3), w))
    kept = {w: rows[w] for w in sorted(order[:limit])}
    return kept, omitted_of([rows[w] for w in order[limit:]])


def omitted_of(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How many rows were left out, by state, with their counters summed."""
    states = Counter(str(r.get("state", "?")) for r in rows)
    return {
        "count": len(rows),
        "by_state": dict(sorted(states.items())),
        "accepted": sum(int(r.get("accepted", 0)) for r in rows),
        "rejected": sum(int(r.get("rejected", 0)) for r in rows),
        "dropped": sum(int(r.get("dropped", 0)) for r in rows),
    }
