"""An emulated sensor's compute follows its competitor's bursts on the run's clock."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.emulate.common import profile_class
from edgeps.pyworker.trainer import EmulatedTrainer
from edgeps.workloads.bursts import Bursts
from edgeps.workloads.scenarios import BASE_BATCH, WorkerProfile, make_scenario

LOUD = WorkerProfile(
    compute_time=0.1, compute_jitter=0.0, bursts=Bursts(2.0, 6.0, 0.8, phase=1.0)
)


class InstantGradient:
    """A trainer whose gradient takes no time worth counting."""

    n_params = 4
    model = "softmax:2x2"
    asked_batch = BASE_BATCH
    X = np.zeros((64, 2), np.float32)
    batch = BASE_BATCH

    def params_buffer(self) -> np.ndarray:
        return np.zeros(4, np.float32)

    def step(self) -> str:
        return "stepped"

    def local_round(self, h: int, epochs: float, seconds: float, lr: float) -> int:
        return h


class Clock:
    """The emulation's clock, set by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _trainer(at: float, profile: WorkerProfile = LOUD) -> tuple[EmulatedTrainer, list]:
    slept: list[float] = []
    trainer = EmulatedTrainer(
        InstantGradient(), profile, np.random.default_rng(0), sleep=slept.append,
        clock=Clock(at),
    )  # fmt: skip
    return trainer, slept


def test_a_step_in_a_burst_sleeps_five_times_as_long_and_outside_not() -> None:
    inside, slept_in = _trainer(1.5)
    outside, slept_out = _trainer(4.0)
    inside.step()
    outside.step()
    assert slept_in[0] == pytest.approx(0.5, abs=2e-3)
    assert slept_out[0] == pytest.approx(0.1, abs=2e-3)


def test_without_a_clock_or_bursts_a_step_keeps_its_drawn_time() -> None:
    slept: list[float] = []
    EmulatedTrainer(
        InstantGradient(), LOUD, np.random.default_rng(0), sleep=slept.append
    ).step()
    quiet, slept_quiet = _trainer(1.5, WorkerProfile(compute_time=0.1,
                                                     compute_jitter=0.0))  # fmt: skip
    quiet.step()
    assert slept[0] == pytest.approx(0.1, abs=2e-3)
    assert slept_quiet[0] == pytest.approx(0.1, abs=2e-3)


def test_a_local_round_is_stretched_from_when_it_starts() -> None:
    by_steps, slept = _trainer(1.0)
    assert by_steps.local_round(4, 0.0, 0.0, 0.1) == 4
    assert slept[0] == pytest.approx(2.0, abs=2e-3)
    by_time, slept_t = _trainer(1.0)
    assert by_time.local_round(1, 0.0, 1.0, 0.1) == 2  # 0.5 s per step in a burst
    assert slept_t[0] == pytest.approx(1.0, abs=2e-3)


def test_the_disturbed_sensor_is_labelled_in_the_tables() -> None:
    sc = make_scenario("disturbed", 4, seed=0)
    labels = [profile_class(p) for p in sc.profiles.values()]
    assert sorted(labels) == ["disturbed 0.8 (2/6 s)", "normal", "normal", "normal"]


@pytest.fixture
def ps(mosquitto):  # type: ignore[no-untyped-def]
    from tests.pyworker.test_worker_on_broker import ScriptedPS

    server = ScriptedPS(mosquitto.port, "job1")
    try:
        yield server
    finally:
        server.close()


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["threads", "loop"])
def test_on_a_broker_the_disturbed_sensor_pushes_less_than_its_twin(  # type: ignore[no-untyped-def]
    mosquitto, ps, engine: str
) -> None:
    from edgeps.emulate.emulation import Emulation
    from edgeps.emulate.runner import LoopEmulation

    # Prepare: twins, one with a competitor taking 0.8 of its CPU half the time
    quiet = WorkerProfile(compute_time=0.05, compute_jitter=0.0)
    loud = WorkerProfile(
        compute_time=0.05, compute_jitter=0.0, bursts=Bursts(1.0, 2.0, 0.8, 0.0)
    )
    kind = Emulation if engine == "threads" else LoopEmulation
    emu = kind(mosquitto.url, "job1", profiles={"d0": loud, "q0": quiet}, duration=4.0)
    # Execute
    emu.start()
    ended = emu.join(timeout=40)
    # Assert: 3 times fewer steps in bursts (0.25 s each), as many between
    assert ended
    d0, q0 = ps.updates["d0"], ps.updates["q0"]
    assert q0 > 20
    assert 0.45 * q0 < d0 < 0.8 * q0, (d0, q0)
