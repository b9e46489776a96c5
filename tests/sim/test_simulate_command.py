"""`edgeps simulate`: tables, JSON, comparisons, clear errors."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.matrix.goals import check_goals
from edgeps.sim.compare import PolicySummary, split_policies, summarize
from edgeps.sim.types import SimResult

FAST = ["--workers", "4", "--max-time", "4", "--lr", "0.05"]


def test_single_run_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--policy", "ssp:2", "--scenario", "stragglers", *FAST])
    out = capsys.readouterr().out
    assert rc == 0
    assert "ssp:2" in out and "t_target_s" in out and "idle" in out
    assert "accuracy: 0s 0." in out and "4s 0." in out


def test_single_run_json_has_the_trace(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--policy", "dsp", "--seed", "3", "--json", *FAST])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert data["policy"] == "dsp" and data["seed"] == 3
    assert data["config"]["n_workers"] == 4
    # one point per evaluation (every 0.5 virtual s) over the 4 s run
    assert len(data["trace"]) >= 8 and data["applied"] > 0


def test_compare_gives_medians_per_policy(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["simulate", "--compare", "bsp,asp,dsp:w=2,grace=1", "--seeds", "2", "--json"]
        + FAST
    )
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    names = [p["policy"] for p in data["policies"]]
    assert names == ["bsp", "asp", "dsp:w=2,grace=1"]
    assert all(len(p["runs"]) == 2 for p in data["policies"])
    assert data["policies"][0]["speedup_vs_bsp"] in (1.0, None)


def test_compare_table_lists_every_policy(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["simulate", "--compare", "bsp,kofn", "--seeds", "1", *FAST])
    out = capsys.readouterr().out
    assert rc == 0
    assert "kofn:auto" in out and "vs_bsp" in out and "medians over 1 seeds" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--policy", "nope"],
        ["--scenario", "storm"],
        ["--dataset", "imagenet"],
        ["--compare", "bsp,,asp"],
        ["--lr", "-1"],
        ["--compare", "bsp", "--seeds", "0"],
    ],
)
def test_bad_flags_give_exit_code_2_and_a_message(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["simulate", *FAST, *argv])
    assert rc == 2
    assert "edgeps simulate:" in capsys.readouterr().err


def test_split_policies_keeps_options_together() -> None:
    assert split_policies("bsp,ssp:3,dsp:w=2,grace=4,kofn") == [
        "bsp",
        "ssp:3",
        "dsp:w=2,grace=4",
        "kofn:auto",
    ]
    with pytest.raises(ValueError):
        split_policies("bsp,")


def test_median_time_to_target_counts_unreached_runs_as_slowest() -> None:
    def run(t: float | None) -> SimResult:
        return SimResult("p", "s", 0, t, 0.9, 1.0, 0.1, 1, 10, {})

    assert summarize("p", [run(1.0), run(None), run(3.0)]).time_to_target == 3.0
    assert summarize("p", [run(1.0), run(None), run(None)]).time_to_target is None
    with pytest.raises(ValueError):
        summarize("p", [])


def test_goal_checks_read_the_comparison_tables() -> None:
    def s(policy: str, t: float | None, acc: float) -> PolicySummary:
        return PolicySummary(policy, 1, int(t is not None), t, acc, 1.0, 0.1, 1, [])

    # Prepare: DSP 2.5x faster than BSP, only 1.1x faster than SSP(3)
    mixed = [s("bsp", 10.0, 0.93), s("ssp:1", 5.0, 0.93), s("ssp:3", 4.4, 0.93)]
    mixed += [s("ssp:5", None, 0.9), s("dsp", 4.0, 0.926)]
    homo = [s("bsp", 2.0, 0.95), s("dsp", 2.4, 0.95)]
    # Execute
    goals = {g["goal"]: g for g in check_goals({"mixed": mixed, "homogeneous": homo})}
    # Assert
    assert goals["mixed: BSP time / DSP time"]["ok"] is True
    assert goals["mixed: best SSP time / DSP time"]["ok"] is False
    assert goals["mixed: BSP - DSP final accuracy (points)"]["ok"] is True
    assert goals["homogeneous: DSP time / BSP time"]["ok"] is False


def test_bench_policies_prints_tables_and_goals(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "policies", "--scenarios", "homogeneous", "--policies", "bsp,dsp"]
    # no scale rows here (tests/lab/test_scale_rows.py covers them)
    rc = main([*argv, "--seeds", "1", "--workers", "3", "--scale-sizes", "", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [p["policy"] for p in data["scenarios"]["homogeneous"]] == ["bsp", "dsp"]
    assert data["goals"][0]["goal"].startswith("homogeneous")
