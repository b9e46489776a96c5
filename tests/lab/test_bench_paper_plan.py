"""`edgeps bench paper`: targets, the disturbance and its bound, the sim's step."""

from __future__ import annotations

import argparse
import math

import pytest
from edgeps.lab.bench.paper import POLICIES, settings
from edgeps.lab.bench.paper_plan import (
    base_compute,
    measured_step,
    parse_disturb,
    plan_for,
    scenario_text,
    schedule_bound,
    sim_bound,
    sim_fits,
    sim_ratio,
    stop_target,
    update_bound,
)  # fmt: skip
from edgeps.lab.bench.paper_table import (
    PaperRun,
    build_rows,
    goal_lines,
    header,
    table,
)
from edgeps.workloads.scenarios import WorkerProfile, make_scenario


def _args(**kw: object) -> argparse.Namespace:
    base = dict(policies=",".join(POLICIES), workers="3", seeds=3, targets=None,
                quick=False, dataset="mnist", stop_at=None, disturb="",
                eval_interval=None)  # fmt: skip
    base.update(kw)
    return argparse.Namespace(**base)


def test_a_run_stops_at_the_highest_target_the_dataset_reaches_centrally() -> None:
    # Execute
    mnist = settings(_args())
    fashion = settings(_args(dataset="fashion-mnist"))
    asked = settings(_args(targets="0.9", stop_at=0.93))

    # Assert: MNIST keeps 0.97 as a column but stops at 0.95
    assert mnist["targets"] == [0.95, 0.97] and mnist["stop"] == 0.95
    assert fashion["targets"] == list(plan_for("fashion-mnist").targets)
    assert fashion["eval_interval"] > mnist["eval_interval"]
    assert (asked["targets"], asked["stop"]) == ([0.9], 0.93)
    assert stop_target([0.8, 0.85], None, 0.95) == 0.85


def test_an_unknown_dataset_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="fashion-mnist"):
        settings(_args(dataset="cifar"))


def test_disturb_sets_the_scenario_and_bad_values_are_refused() -> None:
    # Execute
    d = parse_disturb("burst=4, period=6,share=0.9")
    sc = make_scenario(scenario_text(d), 3, 0)

    # Assert: the scenario's disturbed worker has those bursts; defaults fill in
    (b,) = [p.bursts for p in sc.profiles.values() if p.bursts]
    assert (b.burst, b.period, b.share) == (4.0, 6.0, 0.9)
    assert parse_disturb("") == {"burst": 2.0, "period": 6.0, "share": 0.8}
    for bad in ("burst=7", "share=0", "share=1.5", "cpu=2", "burst=x", "burst"):
        with pytest.raises(ValueError, match="--disturb"):
            parse_disturb(bad)


def test_the_schedule_bound_is_the_disturbed_workers_average_slowdown() -> None:
    # Default: 0.8 of the core for 2 s of 6: BSP can be at most 1/(1-0.267) slower
    assert schedule_bound(parse_disturb("")) == pytest.approx(1 / (1 - 0.8 / 3))
    assert schedule_bound(parse_disturb("burst=4,period=6,share=0.9")) == (
        pytest.approx(2.5)
    )
    assert math.isinf(schedule_bound(parse_disturb("burst=6,period=6,share=1")))


def test_the_goal_lines_say_whether_two_times_bsp_is_reachable() -> None:
    rows = build_rows([PaperRun("bsp", 0, {"0.95": 30.0}),
                       PaperRun("dsp", 0, {"0.95": 20.0})],
                      ["bsp", "dsp"], [0.95])  # fmt: skip
    s = {"targets": [0.95], "disturb": parse_disturb("")}
    weak = goal_lines({"rows": rows}, s)
    s["disturb"] = parse_disturb("burst=4,period=6,share=0.9")
    strong = goal_lines({"rows": rows}, s)

    assert "BSP/DSP 1.50" in weak[0]
    assert "<= 1.36" in weak[1] and "not reachable" in weak[1]
    assert "<= 2.50" in strong[1] and "not reachable" not in strong[1]


def test_the_simulators_iteration_at_the_batch_takes_the_measured_step() -> None:
    # Arrange: the profile scales its base time by the batch
    base = base_compute(0.030, 256)
    p = WorkerProfile(compute_time=base, compute_jitter=0.0)

    # Execute
    took = p.sample_compute(__import__("numpy").random.default_rng(0), 256)

    # Assert
    assert took == pytest.approx(0.030)


def test_the_step_is_the_undisturbed_workers_median_compute_at_the_end() -> None:
    snaps = [
        {"workers": {"w00": {"compute_s": 0.5}}},
        {
            "workers": {
                "w00": {"compute_s": 0.020},
                "w01": {"compute_s": 0.030},
                "w02": {"compute_s": 0.100},
                "w03": {"compute_s": None},
                "w04": {"compute_s": True},
            }
        },  # fmt: skip
        {"workers": {}},
    ]
    assert measured_step(snaps, "w02") == pytest.approx(0.025)
    assert measured_step([{"workers": {"w02": {"compute_s": 0.1}}}], "w02") is None


def test_the_simulator_is_bounded_by_the_real_runs_length() -> None:
    assert sim_bound(20.0, 45.0) == pytest.approx(30.0)
    assert sim_bound(40.0, 45.0) == 45.0
    assert sim_bound(None, 45.0) == 45.0
    assert sim_ratio(12.0, 10.0) == pytest.approx(1.2)
    assert sim_ratio(None, 10.0) is None and sim_ratio(3.0, None) is None


def test_a_rows_simulator_columns_come_from_the_simulated_seeds_only() -> None:
    # Arrange: seed 0 simulated, seeds 1-2 not (their sim times are unknown)
    runs = []
    for seed, t in ((0, 10.0), (1, 12.0), (2, 14.0)):
        r = PaperRun("dsp", seed, {"0.95": t}, final_accuracy=0.95)
        if seed == 0:
            r.simulated, r.sim_times, r.sim_final_accuracy = True, {"0.95": 13.0}, 0.9
        runs.append(r)

    # Execute
    (row,) = build_rows(runs, ["dsp"], [0.95])

    # Assert: not a median that counts the unsimulated seeds as misses
    assert row.sim_times["0.95"] == 13.0 and row.sim_final_accuracy == 0.9
    assert row.sim_ratio == pytest.approx(1.3)
    assert "1.30" in table([row], [0.95])


def test_a_policy_keeps_its_options_in_the_policies_list() -> None:
    s = settings(_args(policies="bsp,dsp:w=4,grace=1,asp"))
    assert s["policies"] == ["bsp", "dsp:w=4,grace=1", "asp"]


def test_the_header_says_where_a_run_stops_and_why_a_column_stays_empty() -> None:
    # Arrange
    args = argparse.Namespace(model="lenet5", dataset="mnist", optimizer="sgd",
                              lr=0.05, batch=256, max_time=40.0,
                              sim_seeds=1)  # fmt: skip
    s = settings(_args())
    run = PaperRun("dsp", 0, {"0.95": 10.0})
    run.sim_step_s = 0.031

    # Execute
    text = header(args, s, "3", {"runs": [run]})

    # Assert
    assert "stops at 0.95 or 40 s" in text and "31-31 ms" in text
    assert "t0.97: empty" in text
    assert "burst 2 s every 6 s, share 0.8" in text


def test_a_simulation_is_skipped_only_when_the_real_runs_would_not_fit() -> None:
    # 600 s gone, 5 runs of 40 s left: a 30 s simulation fits in 840, not 820
    assert sim_fits(600.0, 840.0, 5, 40.0, 30.0)
    assert not sim_fits(600.0, 820.0, 5, 40.0, 30.0)
    assert sim_fits(10_000.0, 0.0, 5, 40.0, 30.0)  # 0: no limit


def test_the_header_counts_the_simulations_skipped_for_the_budget() -> None:
    args = argparse.Namespace(model="lenet5", dataset="mnist", optimizer="sgd",
                              lr=0.05, batch=256, max_time=40.0,
                              sim_seeds=1)  # fmt: skip
    run = PaperRun("bsp", 0)
    run.sim_skipped = True
    text = header(args, settings(_args()), "3", {"runs": [run, PaperRun("dsp", 0)]})
    assert "1 simulation(s) skipped" in text and "step off" in text


def test_the_default_rows_parse_with_the_tuned_dsp_whole() -> None:
    s = settings(_args())
    assert s["policies"] == list(POLICIES) and "dsp:w=4,grace=1" in s["policies"]


def test_counting_updates_two_times_bsp_is_the_ceiling_at_the_strong_disturbance() -> (
    None
):
    # Arrange: f = 1 - 0.9 x 4 / 6 = 0.4 at the strong one, 1 - 0.8 / 3 at the default
    strong, weak = parse_disturb("burst=4,period=6,share=0.9"), parse_disturb("")
    rows = build_rows([PaperRun("bsp", 0, {"0.95": 30.0}),
                       PaperRun("dsp", 0, {"0.95": 20.0})],
                      ["bsp", "dsp"], [0.95])  # fmt: skip

    # Execute
    lines = goal_lines({"rows": rows}, {"targets": [0.95], "disturb": strong}, 3)

    # Assert: (N - 1 + f) / (N f), at most the schedule's bound
    assert update_bound(strong, 3) == pytest.approx(2.4 / 1.2)
    f = 1 - 0.8 / 3
    assert update_bound(weak, 3) == pytest.approx((2 + f) / (3 * f))
    assert update_bound(weak, 1) == pytest.approx(1.0)  # nobody else to move on
    assert update_bound(weak, 32) < schedule_bound(weak)
    assert update_bound(weak, 10**6) == pytest.approx(schedule_bound(weak), rel=1e-5)
    assert math.isinf(update_bound(parse_disturb("burst=6,period=6,share=1"), 3))
    with pytest.raises(ValueError):
        update_bound(weak, 0)
    assert "<= 2.00 (N = 3" in lines[2] and "reachable only without loss" in lines[2]
    weak_lines = goal_lines({"rows": rows}, {"targets": [0.95], "disturb": weak}, 3)
    assert "<= 1.24" in weak_lines[2] and "not reachable" in weak_lines[2]
    assert len(goal_lines({"rows": rows}, {"targets": [0.95], "disturb": weak})) == 2
