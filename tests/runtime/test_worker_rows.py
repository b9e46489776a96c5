"""Metrics records and summaries list at most N workers; the rest fold into one line."""

from __future__ import annotations

from edgeps.runtime.worker_rows import limit_rows


def row(state: str, accepted: int = 0) -> dict:
    return {"state": state, "accepted": accepted, "rejected": 1, "dropped": 0}


def test_rows_under_the_limit_are_kept_whole() -> None:
    rows = {"a": row("live"), "b": row("dead")}
    kept, omitted = limit_rows(rows, 5)
    assert kept == rows and omitted["count"] == 0


def test_live_workers_are_kept_before_dead_and_joining_ones() -> None:
    # Prepare: 3 live, 2 dead, 1000 ids that never pushed
    rows = {f"j{i:04d}": row("joining") for i in range(1000)}
    rows.update({"d1": row("dead", 5), "d2": row("dead", 7)})
    rows.update({f"w{i}": row("live", 10) for i in range(3)})
    # Execute
    kept, omitted = limit_rows(rows, 4)
    # Assert
    assert list(kept) == ["d1", "w0", "w1", "w2"]
    assert omitted == {
        "count": 1001,
        "by_state": {"dead": 1, "joining": 1000},
        "accepted": 7,
        "rejected": 1001,
        "dropped": 0,
    }
