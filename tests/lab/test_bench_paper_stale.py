"""Staleness against accuracy in `edgeps bench paper`, from metrics snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from edgeps.lab.bench.paper_stale import (
    accuracy_at,
    common_updates,
    mean_staleness,
    stale_lines,
    stale_points,
    stale_summary,
    staleness_until,
    update_curve,
)
from edgeps.lab.bench.paper_table import PaperRun, read_metrics


def _snap(updates: int | None, counts: object, acc: float | None) -> str:
    return json.dumps(
        {"time": 1.0, "updates": updates, "staleness_counts": counts, "accuracy": acc}
    )


def test_mean_staleness_weighs_each_staleness_by_its_count() -> None:
    # Arrange / Execute / Assert: keys are strings in the metrics file
    assert mean_staleness({"0": 2, "1": 1, "4": 1}) == pytest.approx(1.25)
    assert mean_staleness({}) is None
    assert mean_staleness({"x": 1}) is None
    assert mean_staleness({"1": -1}) is None
    assert mean_staleness({"1": True}) is None
    assert mean_staleness(None) is None


def test_update_curve_keeps_snapshots_with_updates_staleness_and_accuracy() -> None:
    # Arrange: one before the first evaluation, one with bad counts, a bad line
    lines = [
        _snap(0, {}, None),
        _snap(10, {"0": 10}, 0.3),
        "not json",
        _snap(20, {"0": 10, "3": 10}, 0.6),
        _snap(30, "nonsense", 0.7),
        _snap(None, {"0": 40}, 0.8),
        _snap(40, {"0": 10, "3": 30}, 0.9),
    ]

    # Execute
    curve = update_curve(read_metrics(lines))

    # Assert
    assert curve == [(10, 0.0, 0.3), (20, 1.5, 0.6), (40, 2.25, 0.9)]


def test_accuracy_at_takes_the_last_point_within_the_updates() -> None:
    # Arrange
    curve = [(10, 0.0, 0.3), (20, 1.5, 0.6), (40, 2.25, 0.9)]

    # Execute / Assert
    assert accuracy_at(curve, 25) == 0.6
    assert accuracy_at(curve, 40) == 0.9
    assert accuracy_at(curve, 5) is None
    assert staleness_until(curve, 0.6) == 1.5
    assert staleness_until(curve, 0.95) == 2.25  # never reached: to the end
    assert staleness_until([], 0.9) is None
    assert common_updates([curve, [(10, 0.0, 0.3), (30, 1.0, 0.8)], []]) == 30
    assert common_updates([[]]) is None


def _run(policy: str, seed: int, curve: list, error: str = "") -> PaperRun:
    return PaperRun(policy, seed, updates=curve, error=error)


def test_runs_compare_at_the_fewest_updates_any_run_applied() -> None:
    # Arrange: asp staler and less accurate at 30 updates; a failed run left out
    runs = [
        _run("bsp", 0, [(10, 0.0, 0.5), (30, 0.5, 0.9), (60, 0.5, 0.95)]),
        _run("asp", 0, [(10, 1.0, 0.4), (35, 3.0, 0.8), (50, 4.0, 0.95)]),
        _run("asp", 1, [(20, 2.0, 0.6), (30, 2.0, 0.85), (40, 3.0, 0.9)]),
        _run("dsp", 0, [(5, 9.0, 0.1)], error="serve exited 1"),
    ]

    # Execute
    at, pts = stale_points(runs, 0.95)
    lines = stale_lines(runs, ["bsp", "asp", "dsp"], 0.95)

    # Assert: 40 is where the shortest good run ends
    assert at == 40
    assert pts == [("bsp", 0, 0.5, 0.9), ("asp", 0, 4.0, 0.8), ("asp", 1, 3.0, 0.9)]
    (line,) = lines
    assert "after 40 applied updates" in line
    assert "bsp 0.5/0.900, asp 3.5/0.850" in line and "dsp" not in line
    summary = stale_summary(runs, 0.95)
    assert summary["updates"] == 40
    assert summary["points"][0] == {
        "policy": "bsp", "seed": 0, "mean_staleness": 0.5, "accuracy": 0.9
    }  # fmt: skip
    assert stale_lines([_run("bsp", 0, [])], ["bsp"], 0.95) == []


def test_the_plot_draws_four_panels_with_the_staleness_points(tmp_path: Path) -> None:
    # Arrange: two rows with curves; matplotlib only where installed
    pytest.importorskip("matplotlib")
    image = pytest.importorskip("PIL.Image")
    from edgeps.lab.bench.paper_plot import plot

    runs = [
        PaperRun("bsp", 0, curve=[(1.0, 0.5), (2.0, 0.9)], staleness=[(1.0, 0)],
                 updates=[(10, 0.5, 0.5), (30, 0.6, 0.9)]),
        PaperRun("asp", 0, curve=[(1.0, 0.6), (2.0, 0.92)], staleness=[(1.0, 3)],
                 updates=[(15, 2.5, 0.6), (40, 3.0, 0.92)]),
    ]  # fmt: skip
    s = {"policies": ["bsp", "asp"], "targets": [0.95], "stop": 0.95}
    out = tmp_path / "paper.png"

    # Execute
    plot({"3": {"runs": runs}}, s, str(out))

    # Assert: one column of four panels (a tall image)
    width, height = image.open(out).size
    assert height > 1.8 * width
