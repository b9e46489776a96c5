"""A board's local round under the real MicroPython: the same delta as CPython's
run of the same module, and as H plain SGD steps computed with numpy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from edgeps import kernels
from edgeps.kernels import ModelSpec
from edgeps_worker.data import XorShift
from edgeps_worker.datafile import write_file

from tests.conftest import run_micropython

REPO = Path(__file__).parents[2]
SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_local_round.py")
SPEC = "mlp:4-5-3"


def _case(tmp_path: Path, scaled: bool) -> tuple[np.ndarray, np.ndarray, list[str]]:
    rng = np.random.default_rng(2)
    X = (rng.normal(size=(40, 4)) * 10 + 50).astype(np.float32)
    y = (np.arange(40) % 3).astype(np.int32)
    data = tmp_path / "d.epsd"
    write_file(str(data), [list(map(float, r)) for r in X], [int(v) for v in y])
    scale = "-"
    if scaled:
        s = np.concatenate([X.mean(axis=0), 1 / X.std(axis=0)]).astype("<f4")
        (tmp_path / "s.bin").write_bytes(s.tobytes())
        scale = str(tmp_path / "s.bin")
    return X, y, [SPEC, str(data), "4", "0.2", scale]


def _read(out: Path, n: int) -> tuple[np.ndarray, np.ndarray]:
    raw = np.frombuffer(out.read_bytes(), dtype="<f4")
    return raw[:n], raw[n:]


def _reference(X: np.ndarray, y: np.ndarray, scale: np.ndarray | None) -> np.ndarray:
    """Four SGD steps at 0.2 on the rows the board's sampler draws."""
    spec = ModelSpec.parse(SPEC)
    p = np.array([(i % 7) * 0.01 - 0.03 for i in range(spec.n_params)], np.float32)
    p = p.astype(np.float32)
    start = p.copy()
    rng = XorShift(1)
    for _ in range(4):
        idx = [rng.below(len(X)) for _ in range(8)]
        xb = X[idx] if scale is None else (X[idx] - scale[:4]) * scale[4:]
        _, g = kernels.loss_and_grad(spec, p, xb.astype(np.float32), y[idx])
        p = p - np.float32(0.2) * g
    return start - p


@pytest.mark.firmware
@pytest.mark.parametrize("scaled", [False, True])
def test_a_board_round_matches_cpython_and_numpy(micropython, tmp_path, scaled):
    # Prepare
    X, y, args = _case(tmp_path, scaled)
    n = ModelSpec.parse(SPEC).n_params
    scale = None
    if scaled:
        scale = np.frombuffer((tmp_path / "s.bin").read_bytes(), dtype="<f4")

    # Execute: the same script under MicroPython and under CPython
    board = run_micropython(micropython, SCRIPT, *args, str(tmp_path / "b.bin"))
    host = subprocess.run(
        [sys.executable, SCRIPT, *args, str(tmp_path / "h.bin")],
        capture_output=True, text=True, timeout=60,
        env={"PYTHONPATH": str(REPO / "firmware")},
    )  # fmt: skip

    # Assert
    assert board.returncode == 0, board.stdout + board.stderr
    assert host.returncode == 0, host.stdout + host.stderr
    assert "steps 4" in board.stdout and "samples 32" in board.stdout
    delta_b, params_b = _read(tmp_path / "b.bin", n)
    delta_h, _ = _read(tmp_path / "h.bin", n)
    np.testing.assert_allclose(delta_b, delta_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(delta_b, _reference(X, y, scale), rtol=1e-3, atol=1e-5)
    assert np.all(np.isfinite(params_b))
