"""Memory of a board in inference mode: the board's file set (as `edgeps flash
--mpy` leaves it) predicts with each model kind in a small MicroPython heap,
with and without a broker to publish to, and reports its peak live heap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from edgeps.model.writers import export
from edgeps.workloads.datasets import load_dataset, partition_iid
from edgeps_worker import datafile

from tests.firmware.test_memory import compile_firmware
from tests.helpers.infer_model import train

pytestmark = [pytest.mark.firmware]
HEAP = "96K"  # as the training memory test; it runs in 80K (64K without a broker)
# a board fetching the job's model (112K until the join stopped reloading the
# kernels), and a sensor board training then predicting (host/BENCHMARKS.md,
# "Board inference")
FETCH_HEAP = "96K"  # 104K before the start-up trims (host/BENCHMARKS.md)
SENSOR_HEAP = "112K"
CASES = [
    ("mlp:64-32-10", "digits"),
    ("softmax:64x10", "digits"),
    ("logistic:30", "breast_cancer"),
]


def run_board(
    micropython: str, board: Path, cfg: dict[str, Any], heap: str = HEAP
) -> subprocess.CompletedProcess[str]:
    (board / "config.json").write_text(json.dumps(cfg))
    env = dict(os.environ, MICROPYPATH=".frozen")  # the board's own folder only
    return subprocess.run(
        [micropython, "-X", f"heapsize={heap}", "-m", "main", "config.json"],
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


def serve_digits(port: int, job: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker",
         f"mqtt://127.0.0.1:{port}", "--job", job, "--dataset", "digits",
         "--model", "mlp:64-32-10", "--policy", "asp", "--quiet", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.slow
@pytest.mark.integration
def test_fetching_board_runs_in_a_small_heap(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: no model file; the job is running
    board = compile_firmware(tmp_path / "board")
    ds = load_dataset("digits", seed=0)
    datafile.write_file(str(board / "rows.bin"), ds.X_test[:40].tolist(), [0] * 40)
    job = serve_digits(mosquitto.port, "memf", "--max-time", "120")
    cfg = {"job": "memf", "worker_id": "f1", "model": "mlp:64-32-10",
           "mode": "infer", "data": "rows.bin", "broker_host": "127.0.0.1",
           "broker_port": mosquitto.port, "verbose": False,
           "memory_probe": True}  # fmt: skip
    try:
        # Execute: joining loads the worker loop and the whole wire module,
        # with none of the run-once code shed as a training board does
        run = run_board(micropython, board, cfg, FETCH_HEAP)
    finally:
        stop(job)
    # Assert
    assert run.returncode == 0, run.stdout + run.stderr
    fetch = int(run.stdout.split("fetch peak heap ")[1].split()[0])
    stats = json.loads(run.stdout.strip().splitlines()[-1].split(" ", 2)[2])
    assert stats["predictions"] == 40 and stats["published"] == 40
    assert "the model came unsigned: set hmac_key" in run.stdout  # no key here
    print(f"\nmlp:64-32-10 fetch then inference, heap {FETCH_HEAP}: fetch peak "
          f"{fetch} B, inference peak {stats['peak_heap']} B")  # fmt: skip


SENSOR = """\
import struct, sys

_f = open("rows.bin", "rb")
_nf, _n = struct.unpack("<HI", _f.read(12)[6:])
_i = [0, 0]


def read(xbuf):
    if "edgeps_worker.infer" in sys.modules:  # predicting: 40 readings, then end
        _i[1] += 1
        if _i[1] > 40:
            raise StopIteration
    i = _i[0] % _n
    _i[0] += 1
    _f.seek(12 + i * (4 * _nf + 4))
    _f.readinto(memoryview(xbuf))
    return struct.unpack("<i", _f.read(4))[0]
"""


@pytest.mark.slow
@pytest.mark.integration
def test_board_predicting_after_its_job_runs_in_a_small_heap(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: a sensor board trains to the job's end, then predicts on
    board = compile_firmware(tmp_path / "board")
    ds = load_dataset("digits", seed=0)
    X, y = ds.shard(partition_iid(len(ds.y_train), 4, seed=0)[0])
    datafile.write_file(str(board / "rows.bin"), X.tolist(), y.tolist())
    (board / "rows_sensor.py").write_text(SENSOR)
    job = serve_digits(mosquitto.port, "memk", "--max-time", "8")
    cfg = {"job": "memk", "worker_id": "k1", "model": "mlp:64-32-10",
           "sensor": "rows_sensor", "broker_host": "127.0.0.1", "batch": 16,
           "capacity": 16,
           "broker_port": mosquitto.port, "verbose": False,
           "memory_probe": True}  # fmt: skip
    try:
        # Execute: a sensor board's ring of readings comes on top of what a
        # data board trains with
        run = run_board(micropython, board, cfg, SENSOR_HEAP)
    finally:
        stop(job)
    # Assert: trained to done, kept the model, predicted 40 readings
    assert run.returncode == 0, run.stdout + run.stderr
    lines = [x for x in run.stdout.splitlines() if x.startswith("stopped: ")]
    assert [x.split()[1] for x in lines] == ["done", "done"], run.stdout
    train = json.loads(lines[0].split(" ", 2)[2])
    infer = json.loads(lines[1].split(" ", 2)[2])
    assert infer["predictions"] == 40 and (board / "model.bin").is_file()
    print(f"\nmlp:64-32-10 training then inference, heap {SENSOR_HEAP}: training peak "
          f"{train['peak_mem']} B, inference peak {infer['peak_heap']} B")  # fmt: skip
