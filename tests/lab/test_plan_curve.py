"""The planner's load curves: measured (load, cores) points joined by lines."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from edgeps.cli import main
from edgeps.lab.plan import calibrate as plan_calibrate
from edgeps.lab.plan.capacity import Calibration, PlanInput, plan
from edgeps.lab.plan.curve import capacity, cores_at, curve

# three jobs whose cost per update falls with the load: 800, 650, 560 us
# on average, 600 us then 500 us between them (0.02 cores at no load)
POINTS = [(100.0, 0.08), (400.0, 0.26), (1000.0, 0.56)]


def _flat(points: object) -> list[float]:
    return [v for p in points for v in p]  # type: ignore[attr-defined]


def test_the_curve_starts_where_the_two_lowest_points_meet_no_load() -> None:
    knots = curve(POINTS)

    assert _flat(knots) == pytest.approx(_flat([(0.0, 0.02), *POINTS]))


@pytest.mark.parametrize(
    ("load", "cores"),
    [
        (0.0, 0.02),
        (50.0, 0.05),  # 0.02 + 600 us x 50
        (250.0, 0.17),  # between 100 and 400: 0.08 + 600 us x 150
        (1000.0, 0.56),
        (2000.0, 1.06),  # past the end at the last segment's 500 us
    ],
)
def test_cores_follow_the_measured_points_between_and_past_them(
    load: float, cores: float
) -> None:
    assert cores_at(curve(POINTS), load) == pytest.approx(cores)


def test_a_cost_per_unit_is_added_on_top() -> None:
    knots = curve(POINTS)

    assert cores_at(knots, 1000.0, per_unit=1e-4) == pytest.approx(0.66)
    assert cores_at(knots, 2000.0, per_unit=1e-4) == pytest.approx(1.26)


@pytest.mark.parametrize(
    ("limit", "load"),
    [(0.17, 250.0), (0.56, 1000.0), (0.7, 1280.0), (0.01, 0.0)],
)
def test_capacity_is_the_highest_load_within_a_limit(limit: float, load: float) -> None:
    assert capacity(curve(POINTS), limit) == pytest.approx(load)


def test_capacity_inverts_cores_with_a_cost_per_unit() -> None:
    knots = curve(POINTS)

    load = capacity(knots, 0.9, per_unit=1e-4)

    assert cores_at(knots, load, per_unit=1e-4) == pytest.approx(0.9)


def test_cores_never_fall_as_the_load_rises() -> None:
    # the second job measured less than the first: raised to it
    knots = curve([(100.0, 0.1), (200.0, 0.08)])

    assert _flat(knots) == pytest.approx([0.0, 0.1, 100.0, 0.1, 200.0, 0.1])
    assert cores_at(knots, 150.0) == pytest.approx(0.1)
    assert capacity(knots, 0.5) == math.inf


def test_one_point_is_cores_in_proportion_to_the_load() -> None:
    knots = curve([(200.0, 0.1)])

    assert cores_at(knots, 400.0) == pytest.approx(0.2)
    assert capacity(knots, 0.7) == pytest.approx(1400.0)


def test_no_load_cores_are_never_negative_nor_above_the_lowest_point() -> None:
    # steep: the two lowest points' line crosses zero load below zero
    assert curve([(100.0, 0.05), (200.0, 0.3)])[0] == (0.0, 0.0)
    # points at one load are averaged
    averaged = curve([(100.0, 0.1), (100.0, 0.2)])
    assert _flat(averaged) == pytest.approx([0.0, 0.0, 100.0, 0.15])


@pytest.mark.parametrize("bad", [[], [(0.0, 0.1)], [(10.0, -0.1)], [(math.nan, 1.0)]])
def test_bad_points_are_value_errors(bad: list[tuple[float, float]]) -> None:
    with pytest.raises(ValueError):
        curve(bad)


CURVED = Calibration(
    host_fixed_us=500.0,
    host_per_param_us=0.1,
    broker_us_per_msg=50.0,
    core_us_per_update=20.0,
    host_loads=tuple(POINTS),
    broker_loads=((250.0, 0.02), (2200.0, 0.1)),
    job_n_params=64,
    job_rate=1.0,
)


def _inp(**kw: object) -> PlanInput:
    base: dict[str, object] = dict(
        sensors=1000, model="linear:63", n_params=64, rate=1.0, link_bps=250_000.0
    )
    base.update(kw)
    return PlanInput(**base)  # type: ignore[arg-type]


def test_the_plan_charges_serve_from_its_load_curve() -> None:
    p = plan(_inp(), CURVED)

    host = p.tier("host")
    assert host.cpu_cores == pytest.approx(0.56)
    assert host.need == 1
    assert "560 us each" in host.note
    assert p.warnings == []


def test_a_load_past_one_host_needs_hosts_by_the_curve_s_capacity() -> None:
    # 4000 updates/s: 2.06 cores; 1280 updates/s fit in 0.7 of a core
    p = plan(_inp(sensors=4000), CURVED)

    assert p.tier("host").cpu_cores == pytest.approx(2.06)
    assert p.tier("host").need == 4
    assert any("about 1280 updates/s" in w for w in p.warnings)


def test_a_larger_model_adds_its_per_parameter_cost_per_update() -> None:
    # 1000 more parameters at 0.1 us each: 100 us more per update
    p = plan(_inp(model="linear:1063", n_params=1064), CURVED)

    assert p.tier("host").cpu_cores == pytest.approx(0.56 + 0.1)


def test_a_plan_at_another_rate_than_the_jobs_says_so() -> None:
    p = plan(_inp(rate=4.0, sensors=250), CURVED)

    assert any("calibrated at 1 updates/s per sensor" in w for w in p.warnings)


def test_jobs_give_serve_and_broker_points() -> None:
    jobs = [
        {"sensors": 100, "updates_per_s": 99.0, "serve_cores": 0.09,
         "broker_cores": 0.02},
        {"sensors": 500, "updates_per_s": 480.0, "serve_cores": 0.3,
         "broker_cores": None},
    ]  # fmt: skip

    host, broker = plan_calibrate.job_points(jobs, heartbeat_s=5.0)

    assert host == [(99.0, 0.09), (480.0, 0.3)]
    # each update and its release go in; sensors pushing about once a second
    # send no heartbeat, ones pushing once in 12 s two between pushes
    assert broker == [(2 * 99.0, 0.02)]
    slow = [{**jobs[0], "updates_per_s": 100 / 12}]
    ((msgs, _),) = plan_calibrate.job_points(slow, heartbeat_s=5.0)[1]
    assert msgs == pytest.approx(2 * 100 / 12 + 100 * 2 / 12)
    with pytest.raises(RuntimeError):
        plan_calibrate.job_points([{**jobs[0], "updates_per_s": 0.0}], 5.0)


def test_a_stored_curve_is_read_back_and_planned_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare
    path = tmp_path / "cal.json"
    plan_calibrate.save(CURVED, path)

    # Execute
    argv = ["plan", "--sensors", "1000", "--model", "linear:63", "--rate", "1/s",
            "--calibration", str(path), "--json"]  # fmt: skip
    assert main(argv) == 0

    # Assert
    assert plan_calibrate.load(path) == CURVED
    out = json.loads(capsys.readouterr().out)
    host = next(t for t in out["tiers"] if t["name"] == "host")
    assert host["cpu_cores"] == pytest.approx(0.56)
    broken = dataclasses.replace(CURVED, host_loads=((100.0, -1.0),))
    path.write_text(json.dumps(broken.to_dict()))
    assert plan_calibrate.load(path) is None
