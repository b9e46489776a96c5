"""`edgeps bench disturb`: sorting a worker's steps by the bursts, and a real run."""

from __future__ import annotations

import argparse
import json
import os

import pytest
from edgeps.commands import bench as bench_cmd
from edgeps.lab.bench import disturb as bench
from edgeps.lab.bench import disturb_worker
from edgeps.lab.cpusched import realtime_allowed
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


def test_pushes_sort_into_bursts_and_between_as_the_share_predicts() -> None:
    # Arrange: bursts [1, 2) and [4, 5); a step of 0.1 s (0.05 s of it compute)
    # between bursts, 0.25 s (the compute at 1 - 0.75) inside
    schedule = Bursts(burst=1.0, period=3.0, share=0.75, phase=1.0)
    times = [0.2, 0.3, 0.4, 0.5, 1.1, 1.35, 1.6, 1.85, 2.2, 2.3, 2.4]

    # Execute
    inside, between = disturb_worker.split_steps(times, schedule)
    got = disturb_worker.summarise(
        {"w0": times, "w1": [0.1 * i for i in range(30)]},
        [(0.1 * i, 0.1 * i * (0.25 if schedule.in_burst(0.1 * i) else 0.5))
         for i in range(30)],
        schedule,
    )  # fmt: skip

    # Assert: steps touching an edge are in neither set
    assert inside == pytest.approx([0.25, 0.25, 0.25])
    assert between == pytest.approx([0.1, 0.1, 0.1, 0.1, 0.1])
    assert disturb_worker.predicted_ratio(0.1, 0.05, 0.75) == pytest.approx(2.5)
    assert disturb_worker.predicted_ratio(0.1, 0.0, 0.75) == 1.0
    assert got["ratio"] == pytest.approx(2.5)
    assert got["twin_ratio"] == pytest.approx(1.0)


def test_cpu_time_sorts_into_bursts_and_between() -> None:
    # Arrange: 0.2 CPU s per s inside the burst [1, 2), 0.9 outside
    schedule = Bursts(burst=1.0, period=10.0, share=0.8, phase=1.0)
    samples, cpu = [], 0.0
    for i in range(40):
        t = 0.1 * i
        samples.append((t, cpu))
        cpu += 0.1 * (0.2 if schedule.in_burst(t) else 0.9)

    # Execute
    inside, outside = disturb_worker.split_cpu(samples, schedule)

    # Assert
    assert inside == pytest.approx(0.2)
    assert outside == pytest.approx(0.9)


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
    assert bench.run(_args("--real-worker", "--shares", "0.5,1.0")) == 2
    assert capsys.readouterr().err.startswith("edgeps bench disturb: ")


@pytest.mark.slow
def test_a_real_worker_slows_in_the_bursts_and_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not realtime_allowed():
        pytest.skip("a real-time competitor needs root or CAP_SYS_NICE")
    args = _args(
        "--model", CONV1D, "--shares", "0.75", "--burst", "1", "--period", "2",
        "--baseline", "1.5", "--seconds", "5", "--isolate", "--json",
    )  # fmt: skip
    children = set(os.listdir("/proc"))

    assert bench.run(args) == 0

    (row,) = json.loads(capsys.readouterr().out)
    assert row["burners"] == 1 and row["effective_share"] == 0.75
    assert row["steps"] > 20
    # within the span, a step in a burst against one between: the share
    # predicts 4x on a core of its own, which isolation gives it
    assert row["cpu_between"] > 0.8, row
    assert row["rel_x"] > 2.0, row
    assert row["span_pred_x"] > 1.0
    leftover = set(os.listdir("/proc")) - children
    for pid in filter(str.isdigit, leftover):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{pid}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone already
        # ours: a child of this process, or orphaned (another bench running on
        # the same machine has its own parent)
        if ppid in (os.getpid(), 1):
            assert b"os.sched_setaffinity" not in cmdline  # no burner, no worker left
