"""The metrics snapshot: every worker classed against one median, monitor optional."""

from __future__ import annotations

from tests.core.test_server import Worker, make_server


def test_snapshot_without_monitor_has_the_same_worker_rows() -> None:
    ps = make_server("asp")
    workers = [Worker(ps, f"w{i}") for i in range(5)]
    for t in range(1, 8):
        for i, w in enumerate(workers):
            w.push(t + 0.1 * i, compute=1.0 + 2.0 * (i == 4))
    full, light = ps.snapshot(9.0), ps.snapshot(9.0, monitor=False)
    assert "monitor" in full and "monitor" not in light
    assert light["workers"] == full["workers"]
    live = list(full["workers"])
    assert {w: r["class"] for w, r in full["workers"].items()} == {
        w: ps.monitor.classify(w, live) for w in live
    }
