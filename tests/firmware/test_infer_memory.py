"""Memory of a board in inference mode: the board's file set (as `edgeps flash
--mpy` leaves it) predicts with each model kind in a small MicroPython heap,
with and without a broker to publish to, and reports its peak live heap."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from edgeps.model.writers import export
from edgeps_worker import datafile

from tests.firmware.test_memory import compile_firmware
from tests.helpers.infer_model import train

pytestmark = [pytest.mark.firmware]
HEAP = "96K"  # as the training memory test; it runs in 80K (64K without a broker)
CASES = [
    ("mlp:64-32-10", "digits"),
    ("softmax:64x10", "digits"),
    ("logistic:30", "breast_cancer"),
]


def run_board(
    micropython: str, board: Path, cfg: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    (board / "config.json").write_text(json.dumps(cfg))
    env = dict(os.environ, MICROPYPATH=".frozen")  # the board's own folder only
    return subprocess.run(
        [micropython, "-X", f"heapsize={HEAP}", "-m", "main", "config.json"],
        capture_output=True, text=True, timeout=120, env=env, cwd=board,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize(("spec", "dataset"), CASES)
def test_inference_board_runs_in_a_small_heap(
    micropython: str, mosquitto: Any, tmp_path: Path, spec: str, dataset: str
) -> None:
    # Prepare
    board = compile_firmware(tmp_path / "board")
    model, X, _ = train(spec, dataset, steps=30)
    export(model, "micropython", board / "model.bin")
    datafile.write_file(str(board / "rows.bin"), X[:40].tolist(), [0] * 40)
    cfg = {"job": "mem", "worker_id": "b1", "model": spec, "mode": "infer",
           "data": "rows.bin", "broker_host": "", "verbose": False,
           "memory_probe": True}  # fmt: skip
    peaks = {}
    for broker in ("", "127.0.0.1"):
        # Execute
        run = run_board(
            micropython,
            board,
            {**cfg, "broker_host": broker, "broker_port": mosquitto.port},
        )
        # Assert
        assert run.returncode == 0, run.stdout + run.stderr
        stats = json.loads(run.stdout.strip().splitlines()[-1].split(" ", 2)[2])
        assert stats["predictions"] == 40
        assert stats["published"] == (40 if broker else 0)
        peaks[broker or "none"] = stats["peak_heap"]
    print(f"\n{spec} inference, heap {HEAP}: peak live heap {peaks} B")
