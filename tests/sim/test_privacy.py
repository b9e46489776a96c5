"""The simulator with DP: it still learns at small noise and reports epsilon."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.sim.simulator import Simulator, simulate
from edgeps.sim.types import SimConfig

pytest.importorskip("dp_accounting")

SMALL = {"n_workers": 4, "max_time": 15.0, "dp_clip": 1.0, "dp_noise": 0.05}


@pytest.mark.parametrize("mode", ["central", "local"])
def test_small_noise_still_reaches_the_target(mode: str) -> None:
    result = simulate(dp=mode, **SMALL)  # type: ignore[arg-type]
    assert result.time_to_target is not None
    p = result.privacy
    assert p["mode"] == mode and p["steps"] == result.applied > 0
    assert (p["sigma"], p["clip"], p["delta"]) == (0.05, 1.0, 1e-5)
    assert 0 < p["epsilon_per_shard"] <= p["epsilon"] < float("inf")


def test_off_is_the_run_of_before_bit_for_bit() -> None:
    base = {"n_workers": 4, "max_time": 5.0}
    plain = simulate(**base)  # type: ignore[arg-type]
    off = simulate(dp="off", dp_clip=0.3, dp_noise=7.0, **base)  # type: ignore[arg-type]
    assert off.trace == plain.trace and off.final_accuracy == plain.final_accuracy
    assert off.privacy == {} and off.stop_reason == "max_time"


def test_a_seeded_run_is_reproducible_and_the_seed_moves_the_noise() -> None:
    runs = [simulate(dp="central", seed=s, **SMALL) for s in (1, 1, 2)]  # type: ignore[arg-type]
    assert runs[0].trace == runs[1].trace
    assert runs[0].trace != runs[2].trace


def test_each_workers_sampling_rate_is_its_batch_over_its_shard() -> None:
    sim = Simulator(SimConfig(dp="central", n_workers=4))
    assert sim.dp is not None
    for wid, w in sim.workers.items():
        assert sim.dp.rates[wid] == pytest.approx(min(w.batch, len(w.y)) / len(w.y))


def test_the_budget_ends_the_run() -> None:
    cfg = {**SMALL, "dp_noise": 2.0, "dp_epsilon_budget": 3.0}
    result = simulate(dp="central", **cfg)  # type: ignore[arg-type]
    assert result.stop_reason == "privacy_budget"
    assert result.privacy["epsilon"] <= 3.0 and result.privacy["budget"] == 3.0
    assert result.applied == result.privacy["steps"] > 0
    assert result.trace[-1][0] < SMALL["max_time"]
    with pytest.raises(ValueError, match="allows no update"):
        simulate(dp="central", dp_epsilon_budget=1.0, **SMALL)  # type: ignore[arg-type]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="--dp"):
        SimConfig(dp="central", dp_clip=0.0)
    with pytest.raises(ValueError, match="dp_delta"):
        SimConfig(dp="central", dp_delta=1.0)


def test_the_command_prints_epsilon(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--workers", "4", "--max-time", "5", "--dp", "central", "--dp-noise", "1"]
    assert main(["simulate", *flags]) == 0
    out = capsys.readouterr().out
    assert "dp central clip 1 noise 1" in out and "privacy (central): epsilon" in out
    assert main(["simulate", *flags, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["privacy"]["steps"] > 0 and data["config"]["dp"] == "central"
    assert main(["simulate", "--dp", "central", "--dp-clip", "-1"]) == 2
