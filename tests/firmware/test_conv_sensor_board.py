"""End to end: a MicroPython board whose sensor gives one 3-axis sample a read
trains an 8-filter conv1d next to `edgeps serve` on a real mosquitto (the job
scaled: its WELCOME's card, 1.5 KB, is longer than the board's 1 KB chunk
and comes whole), keeps the model
on flash when the job is done, goes on predicting a window per stride (in
the same process, as a soft reset does) and, after a restart with no host,
predicts the same classes as the host's numpy on the kept model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.model import mpy_export
from edgeps.workloads.datasets import sensor_signals
from edgeps_worker import datafile

from tests.conftest import FIRMWARE
from tests.firmware.test_train_with_serve import MPY_ENV
from tests.helpers.fw_host import Started, write_worker_config

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.firmware]
SPEC = "conv1d:3x64-c8k5p2-m2-c8k5p2-m2-c8k5p2-m2-6"
N_STREAM = 240  # windows the sensor replays, 64 samples each

SENSOR = '''\
"""The samples of stream.bin in turn (3 axes and the activity), as a sensor."""
import struct

_f = open("stream.bin", "rb")
_nf, _n = struct.unpack("<HI", _f.read(12)[6:])
_i = [0]


def read(xbuf):
    i = _i[0] % _n
    _i[0] += 1
    _f.seek(12 + i * (4 * _nf + 4))
    _f.readinto(memoryview(xbuf))
    return struct.unpack("<i", _f.read(4))[0]
'''


def write_job_files(tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The sensor's sample stream (the windows of N_STREAM activities, one
    sample a row) and serve's held-out windows; returns the stream's windows."""
    X, y = sensor_signals(N_STREAM + 600, 11)
    samples = X[:N_STREAM].transpose(0, 2, 1).reshape(-1, 3)
    labels = np.repeat(y[:N_STREAM], 64)
    datafile.write_file(str(tmp_path / "stream.bin"), samples.tolist(), labels.tolist())
    np.savez(tmp_path / "test.npz", X=X[N_STREAM:].reshape(600, -1), y=y[N_STREAM:])
    (tmp_path / "accel.py").write_text(SENSOR)
    return X[:N_STREAM].reshape(N_STREAM, -1), y[:N_STREAM]


def serve(port: int, tmp_path: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker",
         f"mqtt://127.0.0.1:{port}", "--job", "win", "--model", SPEC,
         "--test-data", str(tmp_path / "test.npz"), "--policy", "asp",
         "--lr", "0.05", "--target-accuracy", "0.6", "--max-time", "150",
         "--quiet", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def predictions(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.split(" ", 2)[2])
        for line in text.splitlines()
        if line.startswith("pred ")
    ]


def test_conv_sensor_board_trains_keeps_and_predicts_windows_after_restart(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: one sample a read, a window per 64 samples (stride = length)
    windows, _ = write_job_files(tmp_path)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="win", model=SPEC, batch=16, data="",
        sensor="accel", capacity=48, max_iterations=0, verbose=True, stride=64,
    )  # fmt: skip
    env = dict(MPY_ENV, MICROPYPATH=f"{tmp_path}:{FIRMWARE}:.frozen")
    board = Started([micropython, str(FIRMWARE / "main.py"), str(cfg)], env=env,
                    cwd=tmp_path)  # fmt: skip
    job = None
    try:
        assert board.wait_for("mpy-1: connected", 60), board.output
        job = serve(mosquitto.port, tmp_path)
        # Execute: the job ends; the board keeps its model and predicts on
        assert board.wait_for("pred 5 ", 200), board.output
        out, err = job.communicate(timeout=60)
    finally:
        board.kill()
        if job is not None and job.poll() is None:
            job.kill()
            job.wait(timeout=10)
    summary = json.loads(out.strip().splitlines()[-1])
    assert "stopped: done" in board.output, board.output
    assert "kept the job's model in model.bin" in board.output
    assert "oversized" not in board.output
    # six activities: chance is 1/6
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["accuracy"] >= 0.6
    assert summary["workers"]["mpy-1"]["accepted"] > 0

    # Execute: a restart with the same config and no host reachable
    (tmp_path / "accel.py").write_text(SENSOR)  # the stream from its start
    dead = dict(json.loads(cfg.read_text()), broker_port=1)
    cfg.write_text(json.dumps(dead))
    again = Started([micropython, str(FIRMWARE / "main.py"), str(cfg)], env=env,
                    cwd=tmp_path)  # fmt: skip
    try:
        assert again.wait_for("pred 9 ", 60), again.output
    finally:
        again.kill()
    # Assert: window k of the stream gets the kept model's class on the host
    preds = predictions(again.output)[:10]
    kept = mpy_export.read(tmp_path / "model.bin")
    assert str(kept.spec) == SPEC
    want = kept.predict(windows[:10]).tolist()
    print(
        f"\nserve accuracy {summary['accuracy']:.3f}; board after a restart: "
        f"{[p['value'] for p in preds]} host {want}"
    )
    assert [p["value"] for p in preds] == want
    assert "mpy-1: connected" not in again.output
