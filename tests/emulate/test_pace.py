"""Paced sensors: each step lasts its base time from its start, jitter set or off."""

from __future__ import annotations

import argparse
import time

import numpy as np
import pytest
from edgeps.commands import emulate as emulate_cmd
from edgeps.emulate.common import EmulationConfig, with_compute
from edgeps.emulate.emulation import Emulation
from edgeps.emulate.runner import LoopEmulation
from edgeps.emulate.timers import paced_rest
from edgeps.lab.bench import scale
from edgeps.lab.bench.scale_run import RunResult, jitter_args
from edgeps.pyworker.trainer import EmulatedTrainer
from edgeps.transport.options import ConnectionOptions
from edgeps.workloads.scenarios import BASE_BATCH, WorkerProfile, make_scenario

BROKER = ["--broker", "mqtt://127.0.0.1:9", "--job", "j"]


class SlowGradient:
    """A trainer whose gradient takes ``seconds`` of real CPU time."""

    n_params = 4
    model = "softmax:2x2"
    asked_batch = BASE_BATCH

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def params_buffer(self) -> np.ndarray:
        return np.zeros(4, np.float32)

    def step(self) -> str:
        end = time.perf_counter() + self.seconds
        while time.perf_counter() < end:
            pass
        return "grad"


def _config(**kwargs: object) -> EmulationConfig:
    return EmulationConfig(
        ConnectionOptions(broker="mqtt://127.0.0.1:9"), "job", **kwargs
    )  # type: ignore[arg-type]


def test_jitter_zero_gives_every_sensor_exactly_its_base_time() -> None:
    profiles = make_scenario("homogeneous", 5).profiles
    assert {p.compute_jitter for p in profiles.values()} == {0.05}

    paced = with_compute(profiles, _config(compute_time=1.0, compute_jitter=0.0))

    rng = np.random.default_rng(3)
    for p in paced.values():
        assert p.compute_jitter == 0.0
        assert p.compute_time == 1.0
        assert [p.sample_compute(rng) for _ in range(20)] == [1.0] * 20


def test_jitter_alone_keeps_the_scenarios_time_and_none_keeps_both() -> None:
    profiles = {"a": WorkerProfile(compute_time=0.3, straggler_factor=2.0)}

    spread = with_compute(profiles, _config(compute_jitter=0.2))
    untouched = with_compute(profiles, _config())

    assert spread["a"].compute_time == 0.3
    assert spread["a"].straggler_factor == 2.0
    assert spread["a"].compute_jitter == 0.2
    assert untouched is profiles


@pytest.mark.parametrize("sigma", [-0.1, float("nan"), float("inf")])
def test_a_bad_jitter_is_refused(sigma: float) -> None:
    with pytest.raises(ValueError, match="compute_jitter"):
        with_compute({"a": WorkerProfile()}, _config(compute_jitter=sigma))


def test_a_step_ends_its_drawn_time_after_it_started_the_gradient_included() -> None:
    slept: list[float] = []
    profile = WorkerProfile(compute_time=0.05, compute_jitter=0.0)
    trainer = EmulatedTrainer(
        SlowGradient(0.02), profile, np.random.default_rng(0), sleep=slept.append
    )

    t0 = time.perf_counter()
    trainer.step()
    gradient = time.perf_counter() - t0

    assert len(slept) == 1
    # the sleep is the rest of the period, not the period on top of the gradient
    assert slept[0] < 0.05 - 0.02 + 1e-9
    # and it fills the period: the step's own clock is inside the test's, so
    # a loaded machine may add to the sum but never take from it
    assert gradient + slept[0] >= 0.05 - 1e-3


def test_the_emulate_command_reads_compute_jitter() -> None:
    parser = argparse.ArgumentParser()
    emulate_cmd.configure(parser)

    args = parser.parse_args([*BROKER, "--compute-jitter", "0"])
    default = parser.parse_args(BROKER)

    assert args.compute_jitter == 0.0
    assert default.compute_jitter is None


def test_bench_scale_reads_one_or_more_jitters() -> None:
    assert scale.parse_jitters("0") == [0.0]
    assert scale.parse_jitters("0, 0.05") == [0.0, 0.05]
    for bad in ("", "-0.1", "nan", "x"):
        with pytest.raises(ValueError):
            scale.parse_jitters(bad)


def test_bench_scale_passes_the_jitter_on_and_shows_it() -> None:
    assert jitter_args(0.0) == ["--compute-jitter", "0.0"]
    assert jitter_args(0.05) == ["--compute-jitter", "0.05"]
    assert jitter_args(None) == []

    text = scale.table([RunResult(100, "bsp", 0.0), RunResult(100, "bsp", 0.05)])

    head, paced, spread = text.splitlines()[:3]
    assert head.split()[:3] == ["sensors", "policy", "jitter"]
    assert paced.split()[:3] == ["100", "bsp", "0"]
    assert spread.split()[:3] == ["100", "bsp", "0.05"]


def test_a_paced_step_counts_its_wait_for_the_loop_in_its_time() -> None:
    # a release that arrived at 10.0, handled at 10.3: 0.3 s of its 1 s went
    assert paced_rest(0.9, started=10.3, arrived=10.0) == pytest.approx(0.6)
    # handled as it arrived: the whole rest
    assert paced_rest(0.9, started=10.0, arrived=10.0) == 0.9
    # a wait longer than the step: no sleep, never a negative one
    assert paced_rest(0.2, started=11.5, arrived=10.0) == 0.0
    # a clock that reads an arrival after the start changes nothing
    assert paced_rest(0.5, started=10.0, arrived=10.1) == 0.5


def test_pace_is_a_loop_engine_option() -> None:
    parser = argparse.ArgumentParser()
    emulate_cmd.configure(parser)
    assert parser.parse_args([*BROKER, "--pace"]).pace is True
    assert parser.parse_args(BROKER).pace is False

    loop = LoopEmulation("mqtt://127.0.0.1:9", "j", n_workers=2, pace=True)
    assert loop.config.pace is True
    with pytest.raises(ValueError, match="loop engine"):
        Emulation("mqtt://127.0.0.1:9", "j", n_workers=2, pace=True)


def test_bench_scale_passes_pace_on_and_shows_it() -> None:
    parser = argparse.ArgumentParser()
    scale.configure(parser)
    assert parser.parse_args([]).pace is False
    assert parser.parse_args(["--pace"]).pace is True
    assert parser.parse_args(["--jitter", "0,0.05"]).jitter == "0,0.05"

    text = scale.table([RunResult(100, "bsp", 0.0, True), RunResult(100, "bsp")])

    head, paced, unpaced = (line.split()[:4] for line in text.splitlines()[:3])
    assert head == ["sensors", "policy", "jitter", "pace"]
    assert paced == ["100", "bsp", "0", "yes"]
    assert unpaced == ["100", "bsp", "0", "no"]
