"""`edgeps bench paper`: its run reading, medians, table and goals; one real --quick."""

from __future__ import annotations

import argparse
import json

import pytest
from edgeps.cli import main
from edgeps.lab.bench.paper import POLICIES, QUICK_POLICIES, disturbed_worker, settings
from edgeps.lab.bench.paper_table import (
    PaperRun,
    accuracy_curve,
    build_rows,
    cpu_lines,
    failure_lines,
    idle_fraction,
    push_share,
    ratios,
    read_metrics,
    staleness_series,
    table,
    time_to,
)  # fmt: skip

from tests.conftest import mosquitto_path


def _snap(t: float, acc: float | None, **workers: dict[str, float]) -> str:
    return json.dumps({"time": t, "accuracy": acc, "workers": workers})


def _run(policy: str, seed: int, t95: float | None, acc: float = 0.97) -> PaperRun:
    r = PaperRun(policy, seed, times={"0.95": t95}, final_accuracy=acc)
    r.pushes, r.disturbed = {"w00": 10, "w01": 10, "w02": 4}, "w02"
    return r


def test_metrics_give_accuracy_over_time_and_the_first_time_at_a_target() -> None:
    # Arrange: snapshots on the epoch clock, one before any evaluation, one bad line
    lines = [_snap(100.0, None), "not json", _snap(101.0, 0.5), _snap(102.5, 0.96),
             _snap(103.0, 0.94), _snap(104.0, 0.975)]  # fmt: skip

    # Execute
    curve = accuracy_curve(read_metrics(lines), t0=99.0)

    # Assert: times count from t0; a target is reached at its first crossing
    assert curve == [(2.0, 0.5), (3.5, 0.96), (4.0, 0.94), (5.0, 0.975)]
    assert time_to(curve, 0.95) == 3.5
    assert time_to(curve, 0.97) == 5.0
    assert time_to(curve, 0.99) is None


def test_staleness_series_and_idle_share_follow_the_named_worker() -> None:
    # Arrange: w02 waits most of each iteration at the end
    snaps = read_metrics([
        _snap(10.0, 0.1, w00={"staleness": 0}, w02={"staleness": 3}),
        _snap(11.0, 0.2, w00={"staleness": 1, "comm_s": 0.1, "iteration_s": 0.4},
              w02={"staleness": 5, "comm_s": 0.3, "iteration_s": 0.4}),
    ])  # fmt: skip

    # Execute / Assert
    assert staleness_series(snaps, "w02", 10.0) == [(0.0, 3), (1.0, 5)]
    assert idle_fraction(snaps) == pytest.approx((0.25 + 0.75) / 2)
    assert idle_fraction(read_metrics([_snap(1.0, 0.1)])) is None


def test_a_row_is_the_median_over_seeds_and_a_miss_counts_as_slowest() -> None:
    # Arrange: dsp hits at 10 and 30, misses once; bsp misses twice of three
    runs = [_run("dsp", 0, 10.0), _run("dsp", 1, 30.0), _run("dsp", 2, None),
            _run("bsp", 0, 50.0), _run("bsp", 1, None),
            _run("bsp", 2, None)]  # fmt: skip

    # Execute
    rows = build_rows(runs, ["bsp", "dsp"], [0.95])

    # Assert: rows in the order asked; dsp's median is its slower hit
    assert [r.policy for r in rows] == ["bsp", "dsp"]
    assert rows[1].times["0.95"] == 30.0
    assert rows[0].times["0.95"] is None
    assert rows[1].disturbed_share == pytest.approx(0.4)
    assert "dsp" in table(rows, [0.95])


def test_a_failed_run_is_counted_and_shown_not_averaged_in() -> None:
    # Arrange
    bad = _run("asp", 1, 1.0)
    bad.error, bad.stderr_tail = "serve exited 2", "edgeps serve: boom"

    # Execute
    (row,) = build_rows([_run("asp", 0, 20.0), bad], ["asp"], [0.95])

    # Assert
    assert (row.runs, row.failed, row.times["0.95"]) == (2, 1, 20.0)
    assert failure_lines([bad]) == ["asp seed 1: FAILED: serve exited 2",
                                    "    edgeps serve: boom"]  # fmt: skip
    assert "1/2" in table([row], [0.95])


def test_goals_compare_dsp_with_bsp_and_the_best_ssp() -> None:
    # Arrange
    runs = [_run("bsp", 0, 60.0, 0.970), _run("ssp:1", 0, 36.0),
            _run("ssp:4", 0, 24.0), _run("dsp", 0, 20.0, 0.968)]  # fmt: skip

    # Execute
    g = ratios(build_rows(runs, ["bsp", "ssp:1", "ssp:4", "dsp"], [0.95]), 0.95)

    # Assert
    assert g["bsp_over_dsp"] == pytest.approx(3.0)
    assert g["ssp_over_dsp"] == pytest.approx(1.2)
    assert g["acc_points"] == pytest.approx(-0.2)


def test_push_share_needs_the_disturbed_worker_and_others() -> None:
    r = _run("asp", 0, 1.0)
    assert push_share(r) == pytest.approx(0.4)
    r.disturbed = "w09"
    assert push_share(r) is None


def test_quick_is_a_small_subset_and_the_disturbed_worker_is_the_scenarios() -> None:
    # Arrange
    args = argparse.Namespace(policies=",".join(POLICIES), workers="3,8",
                              seeds=3, targets="0.97,0.95", quick=False)  # fmt: skip

    # Execute
    full = settings(args)
    args.quick = True
    quick = settings(args)

    # Assert
    assert full["targets"] == [0.95, 0.97] and full["workers"] == [3, 8]
    assert quick["policies"] == list(QUICK_POLICIES) and quick["seeds"] == 1
    wid, bursts = disturbed_worker(3, 0)
    assert wid in {"w00", "w01", "w02"}
    assert (bursts.burst, bursts.period, bursts.share) == (2.0, 6.0, 0.8)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed")
def test_quick_on_a_real_broker_has_its_rows_and_the_disturbed_worker_lags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Execute: bounded by --max-time per run; the bench kills what outlives it
    code = main(["bench", "paper", "--quick", "--max-time", "20", "--json"])

    # Assert: every quick row, from runs that trained
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    res = out["results"]["3"]
    assert [r["policy"] for r in res["rows"]] == list(QUICK_POLICIES)
    runs = res["runs"]
    assert all(r["error"] == "" for r in runs)
    assert all(0.0 <= r["final_accuracy"] <= 1.0 for r in runs)
    # where nobody waits, what the disturbed worker pushed against the others
    (asp,) = [r for r in runs if r["policy"] == "asp"]
    others = [n for w, n in asp["pushes"].items() if w != asp["disturbed"]]
    print("ASP pushes, disturbed", asp["pushes"][asp["disturbed"]], "others", others)
    # the competitor itself: in real-time mode a burst leaves the worker at
    # most 1 - share of its core whatever else runs on the box
    for r in runs:
        print(r["policy"], r["competitor"], "CPU in/out", r["cpu_in"], r["cpu_out"])
        if r["competitor"] == "realtime":
            assert r["cpu_in"] < (1 - 0.8) + 0.1


def test_cpu_lines_give_the_medians_and_the_bound() -> None:
    # Arrange: two runs measured, one from before the sampler (none)
    a = PaperRun("bsp", 0, competitor="realtime", cpu_in=0.1, cpu_out=0.6)
    b = PaperRun("asp", 0, competitor="realtime", cpu_in=0.3, cpu_out=0.8)
    c = PaperRun("dsp", 0)

    # Act
    (line,) = cpu_lines([a, b, c], 0.8)

    # Assert
    assert "median of 2 runs" in line and "0.20 in bursts, 0.70 between" in line
    assert "<= 0.20 (realtime competitor)" in line
    assert cpu_lines([c], 0.8) == []
