"""`edgeps bench byzantine`: the liars, its table, and real jobs on mosquitto."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from edgeps.lab.bench.byzantine import _compare, run_once, table
from edgeps.lab.bench.byzantine_workers import LIES, LyingTrainer, shard

from tests.conftest import Broker


class _Honest:
    """A trainer whose update is always ones: what a liar starts from."""

    n_params, model = 4, "linear"

    def params_buffer(self) -> np.ndarray:
        return np.zeros(4, np.float32)

    def set_scale(self, data: bytes | None) -> None:
        pass

    def step(self) -> tuple[float, int, memoryview]:
        return 0.5, 32, np.ones(4, np.float32).data.cast("B")

    def local_round(
        self, h: int, epochs: float, seconds: float, lr: float
    ) -> tuple[float, int, int, memoryview]:
        return 0.5, 32 * h, h, np.ones(4, np.float32).data.cast("B")


@pytest.mark.parametrize(
    ("lie", "value", "samples", "steps"),
    [
        ("flip10", -10.0, 256, 8),
        ("x1e6", 1e6, 256, 8),
        ("samples", -3.0, 2**32 - 1, 8),
        ("steps65535", 1.0, 256, 65535),
        ("steps0", 1.0, 256, 0),
        ("stepsneg", 1.0, 256, 0x8000),
    ],
)
def test_each_liar_pushes_what_its_lie_says(
    lie: str, value: float, samples: int, steps: int
) -> None:
    liar = LyingTrainer(_Honest(), lie)
    _, n, k, delta = liar.local_round(8, 0.0, 0.0, 0.1)
    assert np.all(np.frombuffer(delta, "<f4") == np.float32(value))
    assert (n, k) == (samples, steps)
    assert not hasattr(liar, "encode_grad")  # F32 only: the lie is on the wire


def test_data_lies_change_the_shard() -> None:
    honest, _ = shard("sensors", 7, 8, 0, None)
    scaled, _ = shard("sensors", 7, 8, 0, "scaled")
    shuffled, _ = shard("sensors", 7, 8, 0, "randlabels")
    np.testing.assert_allclose(scaled.X, honest.X * 1000.0, rtol=1e-6)
    assert np.mean(shuffled.y != honest.y) > 0.3
    assert set(LIES) >= {"flip10", "x1e3", "x1e6", "samples", "randlabels", "scaled"}


def test_the_table_compares_each_row_with_its_clean_run() -> None:
    rows = [
        {"policy": "dsp", "lie": "clean", "liars": 0, "accuracy": 0.94,
         "time_to_target": 2.0, "honest_down": 10, "honest_pushes": 100,
         "liar_down": 0},
        {"policy": "dsp", "lie": "flip10", "liars": 2, "accuracy": 0.93,
         "time_to_target": 3.0, "honest_down": 5, "honest_pushes": 80,
         "liar_down": 40},
    ]  # fmt: skip
    _compare(rows)
    assert rows[1]["d_accuracy"] == -1.0 and rows[1]["time_ratio"] == 1.5
    info = {"dataset": "sensors", "workers": 8, "target_accuracy": 0.85,
            "max_time": 20.0, "wall_seconds": 1.0}  # fmt: skip
    text = table(rows, info)
    assert "flip10" in text and "0/5/80" in text and "1.50" in text


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize(
    ("policy", "lie"), [("dsp", "flip10"), ("fedbuff:k=4", "x1e6")]
)
def test_a_real_job_holds_with_two_liars_of_eight(
    mosquitto: Broker, tmp_path: Path, policy: str, lie: str
) -> None:
    # Prepare: serve and 8 workers on a real mosquitto, 2 of them lying
    args = argparse.Namespace(max_time=20.0, target_accuracy=0.9, seed=0)
    # Execute
    row = run_once(mosquitto.url, "byz", policy, lie, 2, args, tmp_path)
    # Assert: learned (chance is 1/6); the liars were weighed down, honest ones
    # were not (pulled in now and then, but never taken for liars)
    assert "error" not in row, row.get("error")
    assert row["accuracy"] is not None and row["accuracy"] >= 0.85, row
    assert row["liar_down"] > 0.5 * row["liar_pushes"], row
    assert row["honest_down"] < 0.05 * row["honest_pushes"], row
