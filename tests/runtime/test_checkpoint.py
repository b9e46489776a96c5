"""Checkpoints round-trip params, version, nested optimizer state and stats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.types import Join
from edgeps.policy.asp import ASP
from edgeps.runtime.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from edgeps.runtime.job import restore


def test_round_trip_keeps_everything(tmp_path: Path) -> None:
    # Prepare
    rng = np.random.default_rng(3)
    params = rng.standard_normal(100).astype(np.float32)
    state = {
        "name": "adam",
        "n_params": 100,
        "t": 7,
        "hyper": {"beta1": 0.9},
        "buffers": {
            "m": rng.standard_normal(100).astype(np.float32),
            "v": np.abs(rng.standard_normal(100)).astype(np.float32),
        },
    }
    ckpt = Checkpoint(params, 42, state, {"w1": {"accepted": 5}}, {"policy": "dsp"})
    path = tmp_path / "run.npz"

    # Execute
    save_checkpoint(path, ckpt)
    back = load_checkpoint(path)

    # Assert
    np.testing.assert_array_equal(back.params, params)
    assert back.version == 42
    assert back.optimizer_state["t"] == 7
    assert back.optimizer_state["hyper"] == {"beta1": 0.9}
    np.testing.assert_array_equal(
        back.optimizer_state["buffers"]["m"], state["buffers"]["m"]
    )
    np.testing.assert_array_equal(
        back.optimizer_state["buffers"]["v"], state["buffers"]["v"]
    )
    assert back.worker_stats == {"w1": {"accepted": 5}}
    assert back.meta == {"policy": "dsp"}
    assert [p.name for p in tmp_path.iterdir()] == ["run.npz"]  # no temp left


def test_overwrite_is_atomic_replacement(tmp_path: Path) -> None:
    path = tmp_path / "c.npz"
    save_checkpoint(path, Checkpoint(np.zeros(4, np.float32), 1))

    save_checkpoint(path, Checkpoint(np.ones(4, np.float32), 2))

    back = load_checkpoint(path)
    assert back.version == 2
    assert back.params.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_foreign_or_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip at all")

    with pytest.raises(ValueError, match="not an edgeps checkpoint"):
        load_checkpoint(junk)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.npz")


def test_resume_carries_worker_counters_through_a_saved_file(tmp_path: Path) -> None:
    # Prepare: a checkpoint on disk with one worker's counters
    params = np.zeros(4, np.float32)
    stats = {"w1": {"accepted": 9, "rejected": {"replay": 1}, "max_staleness": 2}}
    save_checkpoint(
        tmp_path / "c.npz", Checkpoint(params=params, version=9, worker_stats=stats)
    )
    server = ParameterServer(params, policy=ASP())
    # Execute
    restore(server, load_checkpoint(tmp_path / "c.npz"))
    server.handle(Join("w1"), 0.0)
    # Assert
    assert server.version == 9
    assert server.stats()["w1"].accepted == 9
    assert server.stats()["w1"].rejected == {"replay": 1}


def test_resume_with_malformed_worker_counters_is_a_clear_error() -> None:
    params = np.zeros(4, np.float32)
    bad = Checkpoint(params=params, version=1, worker_stats={"w1": {"accepted": 1}})
    with pytest.raises(ValueError, match="worker stats"):
        restore(ParameterServer(params, policy=ASP()), bad)
