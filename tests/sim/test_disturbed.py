"""A disturbed board in the simulator: its compute follows the competitor's bursts."""

from __future__ import annotations

import json

import numpy as np
import pytest
from edgeps.sim.local import plan_steps
from edgeps.sim.simulator import Simulator
from edgeps.sim.types import SimConfig
from edgeps.workloads.bursts import Bursts
from edgeps.workloads.scenarios import WorkerProfile

QUIET = WorkerProfile(compute_time=0.1, compute_jitter=0.0)
LOUD = WorkerProfile(
    compute_time=0.1, compute_jitter=0.0, bursts=Bursts(2.0, 6.0, 0.8, phase=1.0)
)


def _plan(profile: WorkerProfile, start: float, **kw: float) -> tuple[int, float]:
    args = {"local_steps": 1, "local_epochs": 0.0, "local_time": 0.0, **kw}
    return plan_steps(
        profile,
        np.random.default_rng(0),
        32,
        100,
        start=start,
        **args,  # type: ignore[arg-type]
    )


def test_a_round_inside_a_burst_takes_five_times_as_long_and_outside_not() -> None:
    assert _plan(LOUD, 1.5) == (1, pytest.approx(0.5))
    assert _plan(LOUD, 4.0) == (1, pytest.approx(0.1))
    assert _plan(QUIET, 1.5) == _plan(QUIET, 4.0) == (1, pytest.approx(0.1))
    # crossing the end of a burst: 0.1 s before it ends does 0.02 s of work
    assert _plan(LOUD, 2.9)[1] == pytest.approx(0.1 + 0.08)
    steps, spent = _plan(LOUD, 1.0, local_steps=4)
    assert steps == 4 and spent == pytest.approx(2.0)


def test_a_time_budget_fits_fewer_steps_during_a_burst() -> None:
    inside = _plan(LOUD, 1.0, local_time=1.0)
    outside = _plan(LOUD, 3.5, local_time=1.0)
    assert outside == (10, pytest.approx(1.0))
    assert inside == (2, pytest.approx(1.0))


def _run(scenario: str, seed: int = 0) -> Simulator:
    cfg = SimConfig(
        policy="asp", scenario=scenario, n_workers=4, seed=seed, max_time=12.0,
        target_accuracy=1.0, eval_interval=1.0,
    )  # fmt: skip
    sim = Simulator(cfg)
    sim.run()
    return sim


def test_the_disturbed_board_pushes_less_during_bursts_and_as_much_between() -> None:
    sim = _run("disturbed")
    hit = [w for w, p in sim.scenario.profiles.items() if p.bursts is not None]
    assert len(hit) == 1
    bursts = sim.scenario.profiles[hit[0]].bursts
    assert bursts is not None
    on = bursts.overlap(0.0, 12.0)
    off = 12.0 - on

    def rate(wid: str, in_burst: bool) -> float:
        n = sum(
            1 for t, w in sim.applied_at if w == wid and bursts.in_burst(t) == in_burst
        )
        return n / (on if in_burst else off)

    other = next(w for w in sim.scenario.profiles if w not in hit)
    # an update lands about one iteration after its compute: edges blur a bit
    assert rate(hit[0], True) < 0.45 * rate(other, True)
    assert rate(hit[0], False) > 0.75 * rate(other, False)


def test_a_disturbed_run_repeats_for_its_seed() -> None:
    a, b = _run("disturbed", 3), _run("disturbed", 3)
    assert a.applied_at == b.applied_at
    assert a.applied_at != _run("disturbed", 4).applied_at


def test_the_policy_matrix_runs_the_disturbed_scenario(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from edgeps.cli import main
    from edgeps.lab.matrix.grid import SCENARIOS

    assert "disturbed" in SCENARIOS
    rc = main(
        [
            "bench", "policies", "--matrix", "--scenarios", "disturbed",
            "--datasets", "sensors", "--sizes", "3", "--seeds", "1",
            "--max-time", "3", "--policies", "bsp,dsp", "--balance", "off",
            "--json", "--jobs", "1",
        ]
    )  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [(c["scenario"], c["workers"]) for c in data["cells"]] == [("disturbed", 3)]
