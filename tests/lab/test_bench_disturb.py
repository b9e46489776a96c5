"""`edgeps bench disturb`: sorting a worker's steps by the bursts, and a real run."""

from __future__ import annotations

import argparse
import json
import os

import pytest
from edgeps.commands import bench as bench_cmd
from edgeps.lab.bench import disturb as bench
from edgeps.workloads.bursts import Bursts

CONV1D = "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10"


def _steps_as_profiled(schedule: Bursts, origin: float, w: float) -> list:
    """Steps of ``w`` s back to back, 2 s alone then 10 s as the profile stretches."""
    steps, t = [], origin - 2.0
    while t < origin + 10.0:
        took = w if t < origin else schedule.stretch(t - origin, w)
        steps.append((t, t + took, w))
        t += took
    return steps


def test_steps_that_follow_the_profile_measure_as_predicted() -> None:
    schedule = Bursts(burst=1.0, period=3.0, share=0.75, phase=0.5)
    got = bench.summarise(_steps_as_profiled(schedule, 100.0, 0.01), 100.0, schedule)
    assert got["base_ms"] == pytest.approx(10.0)
    assert got["burst_x"] == pytest.approx(4.0)
    assert got["burst_pred_x"] == pytest.approx(4.0)
    assert got["between_x"] == pytest.approx(1.0)
    assert got["span_x"] == pytest.approx(got["span_pred_x"], rel=1e-6)
    assert got["ratio"] == pytest.approx(1.0)
    assert 1.0 < got["span_x"] < 4.0
    assert got["cpu_between"] == pytest.approx(1.0)
    assert got["rel_x"] == pytest.approx(4.0)
    assert got["rel_pred_x"] == pytest.approx(4.0)


def test_a_worker_the_competitor_never_slowed_measures_below_the_profile() -> None:
    schedule = Bursts(burst=1.0, period=3.0, share=0.75, phase=0.5)
    steps = [
        (100.0 + 0.01 * i, 100.0 + 0.01 * (i + 1), 0.005) for i in range(-200, 1000)
    ]
    got = bench.summarise(steps, 100.0, schedule)
    assert got["burst_x"] == pytest.approx(1.0)
    assert got["ratio"] < 0.8
    # it had half its core between bursts: 0.75 predicts 1 + 0.5 x 3
    assert got["cpu_between"] == pytest.approx(0.5)
    assert got["rel_x"] == pytest.approx(1.0)
    assert got["rel_pred_x"] == pytest.approx(2.5)


def test_no_baseline_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="baseline"):
        bench.summarise([(1.0, 2.0, 1.0)], 0.0, Bursts(1.0, 2.0, 0.5))


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_cmd.configure(parser, ["disturb"])
    return parser.parse_args(["disturb", *argv])


def test_bad_flags_are_refused_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench.run(_args("--shares", "1.0")) == 2
    assert "share" in capsys.readouterr().err


@pytest.mark.slow
def test_a_real_worker_slows_in_the_bursts_and_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = _args(
        "--model", CONV1D, "--shares", "0.75", "--burst", "1", "--period", "2",
        "--baseline", "1.5", "--seconds", "5", "--json",
    )  # fmt: skip
    children = set(os.listdir("/proc"))

    assert bench.run(args) == 0

    (row,) = json.loads(capsys.readouterr().out)
    assert row["burners"] == 3 and row["effective_share"] == 0.75
    assert row["steps"] > 20
    # the slowdown itself is a measurement (edgeps bench disturb), not asserted:
    # how much of the core the burners take depends on the box's scheduler
    print(row)
    assert row["span_pred_x"] > 1.0
    leftover = set(os.listdir("/proc")) - children
    for pid in filter(str.isdigit, leftover):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue  # gone already
        assert b"os.sched_setaffinity" not in cmdline  # no burner, no worker left
