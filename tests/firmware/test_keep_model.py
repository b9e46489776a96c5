"""End to end: your data in, your model out. A MicroPython board trains with
`edgeps serve` on raw readings with text labels (the job's WELCOME carries the
scaler and the class names), keeps the final model on flash when the job is
done, and predicts with it after a restart with no host: the same classes as
onnxruntime on `edgeps export --format onnx` of serve's checkpoint.
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
from edgeps.runtime.checkpoint import load_checkpoint
from edgeps.workloads.datasets import load_dataset, partition_iid
from edgeps_worker import datafile

from tests.conftest import FIRMWARE
from tests.firmware.test_train_with_serve import MPY_ENV
from tests.helpers.fw_host import Started, write_worker_config

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.firmware]
SPEC = "mlp:64-32-10"
NAMES = [f"d{i}" for i in range(10)]


def raw(X: np.ndarray) -> np.ndarray:
    """Readings as a sensor gives them: not standardised (the job's scaler is)."""
    return (X * 3.0 + 1.0).astype(np.float32)


def write_job_files(tmp_path: Path) -> np.ndarray:
    """The board's data (shard 0 of 4, raw) and serve's test CSV (raw, named
    labels); returns the raw test rows."""
    ds = load_dataset("digits", seed=0)
    X, y = ds.shard(partition_iid(len(ds.y_train), 4, seed=0)[0])
    datafile.write_file(str(tmp_path / "data.bin"), raw(X).tolist(), y.tolist())
    Xt = raw(ds.X_test)
    lines = [",".join(f"f{j}" for j in range(64)) + ",label"]
    lines += [
        ",".join(f"{v:.6g}" for v in row) + f",{NAMES[int(c)]}"
        for row, c in zip(Xt, ds.y_test, strict=True)
    ]
    (tmp_path / "test.csv").write_text("\n".join(lines) + "\n")
    return np.array([[float(f"{v:.6g}") for v in row] for row in Xt], np.float32)


def serve(port: int, job: str, tmp_path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker",
         f"mqtt://127.0.0.1:{port}", "--job", job, "--model", SPEC,
         "--test-data", str(tmp_path / "test.csv"), "--label", "label",
         "--policy", "asp", "--target-accuracy", "0.8", "--max-time", "90",
         "--checkpoint", str(tmp_path / "job.npz"), "--quiet", "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def onnx_classes(tmp_path: Path, X: np.ndarray) -> np.ndarray:
    """onnxruntime's classes for raw rows X, on serve's checkpoint exported."""
    ort = pytest.importorskip("onnxruntime")
    out = tmp_path / "model.onnx"
    subprocess.run(
        [sys.executable, "-m", "edgeps", "export", str(tmp_path / "job.npz"),
         "--format", "onnx", "--out", str(out)], check=True, timeout=120,
    )  # fmt: skip
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": X})[1].reshape(-1)


def predictions(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.split(" ", 2)[2])
        for line in text.splitlines()
        if line.startswith("pred ")
    ]


@pytest.mark.parametrize("rounds", [[], ["--local-steps", "4"]])
def test_board_keeps_the_final_model_and_predicts_after_a_restart_with_no_host(
    micropython: str, mosquitto: Any, tmp_path: Path, rounds: list[str]
) -> None:
    # Prepare: a data board (on_done predict, the default: without a sensor
    # it keeps the model and ends); with local rounds, the kept model is the
    # final release, not what a round moved the parameters to
    X_test = write_job_files(tmp_path)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="keep", model=SPEC, batch=16,
        max_iterations=0, verbose=False, data="data.bin",
    )  # fmt: skip
    job = serve(mosquitto.port, "keep", tmp_path, *rounds)
    try:
        # Execute: train to the job's end
        board = subprocess.run(
            [micropython, str(FIRMWARE / "main.py"), str(cfg)], capture_output=True,
            text=True, timeout=180, env=MPY_ENV, cwd=tmp_path,
        )  # fmt: skip
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=10)
    # Assert: done, and the model file holds exactly what the host evaluated
    assert board.returncode == 0, board.stdout + board.stderr
    assert "stopped: done" in board.stdout
    assert "kept the job's model in model.bin" in board.stdout, board.stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] in ("target_accuracy", "max_time"), err
    kept = mpy_export.read(tmp_path / "model.bin")
    ckpt = load_checkpoint(tmp_path / "job.npz")
    assert str(kept.spec) == SPEC and kept.card.classes == tuple(NAMES)
    assert kept.card.scaler is not None
    assert np.array_equal(kept.params, ckpt.params)

    # Execute: restart in inference mode, no broker at all, on the test rows
    datafile.write_file(str(tmp_path / "rows.bin"), X_test.tolist(), [0] * len(X_test))
    infer = dict(json.loads(cfg.read_text()), mode="infer", broker_host="",
                 data="rows.bin", verbose=True)  # fmt: skip
    (tmp_path / "infer.json").write_text(json.dumps(infer))
    again = subprocess.run(
        [micropython, str(FIRMWARE / "main.py"), "infer.json"], capture_output=True,
        text=True, timeout=120, env=MPY_ENV, cwd=tmp_path,
    )  # fmt: skip
    # Assert: the classes of onnxruntime on the host's export, by name
    assert again.returncode == 0, again.stdout + again.stderr
    preds = predictions(again.stdout)
    want = onnx_classes(tmp_path, X_test)
    got = np.array([p["value"] for p in preds])
    assert len(preds) == len(X_test)
    print(
        f"\nserve {summary['stop_reason']} accuracy {summary['accuracy']:.4f}; board "
        f"after a restart, no host: {np.mean(got == want):.4f} of {len(X_test)} rows "
        "as onnxruntime"
    )
    assert np.mean(got == want) >= 0.99
    assert all(p["class"] == NAMES[p["value"]] for p in preds)


SENSOR = '''\
"""The rows of data.bin in turn, as a sensor's read(xbuf) (raw readings)."""
import struct

_f = open("data.bin", "rb")
_nf, _n = struct.unpack("<HI", _f.read(12)[6:])
_i = [0]


def read(xbuf):
    i = _i[0] % _n
    _i[0] += 1
    _f.seek(12 + i * (4 * _nf + 4))
    _f.readinto(memoryview(xbuf))
    return struct.unpack("<i", _f.read(4))[0]
'''


def test_sensor_board_goes_on_predicting_when_the_job_is_done(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: a sensor board with the default on_done (predict)
    write_job_files(tmp_path)
    (tmp_path / "rows_sensor.py").write_text(SENSOR)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="live", model=SPEC, batch=16,
        max_iterations=0, verbose=True, data="", sensor="rows_sensor",
    )  # fmt: skip
    env = dict(MPY_ENV, MICROPYPATH=f"{tmp_path}:{FIRMWARE}:.frozen")
    board = Started([micropython, str(FIRMWARE / "main.py"), str(cfg)], env=env,
                    cwd=tmp_path)  # fmt: skip
    job = None
    try:
        assert board.wait_for("mpy-1: connected", 60), board.output
        job = serve(mosquitto.port, "live", tmp_path)
        # Execute: the job ends; the board keeps its model and predicts on
        assert board.wait_for("pred 9 ", 180), board.output
        job.communicate(timeout=60)
    finally:
        board.kill()
        if job is not None and job.poll() is None:
            job.kill()
            job.wait(timeout=10)
    first = predictions(board.output)
    assert "stopped: done" in board.output
    assert "kept the job's model in model.bin" in board.output

    # Execute: a restart with the same config and no host reachable
    (tmp_path / "rows_sensor.py").write_text(SENSOR)  # its rows from the start
    dead = dict(json.loads(cfg.read_text()), broker_port=1)
    cfg.write_text(json.dumps(dead))
    again = Started([micropython, str(FIRMWARE / "main.py"), str(cfg)], env=env,
                    cwd=tmp_path)  # fmt: skip
    try:
        assert again.wait_for("pred 9 ", 60), again.output
    finally:
        again.kill()
    # Assert: the kept model's classes for the same readings, with no host
    preds = predictions(again.output)[:10]
    kept = mpy_export.read(tmp_path / "model.bin")
    ds = load_dataset("digits", seed=0)
    X, _ = ds.shard(partition_iid(len(ds.y_train), 4, seed=0)[0])
    want = kept.predict(raw(X[:10])).tolist()
    assert sum(p["value"] == c for p, c in zip(preds, want, strict=True)) >= 9
    assert all(p["class"] == NAMES[p["value"]] for p in preds)
    assert "mpy-1: connected" not in again.output and len(first) >= 10


def test_inference_board_fetches_the_model_of_a_running_serve_with_keys(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: keys for the job and this board; a forged PARAMS, signed with
    # another board's key, waits (retained) on the board's down topic
    import paho.mqtt.client as mqtt
    from edgeps.security.keys import derive_worker_key
    from edgeps_worker import wire_host as wire

    X_test = write_job_files(tmp_path)
    master = tmp_path / "master.key"
    subprocess.run([sys.executable, "-m", "edgeps", "keys", "new", "--out",
                    str(master)], check=True, timeout=60)  # fmt: skip
    secret = bytes.fromhex(master.read_text().split()[-1])
    forged = wire.encode_params(
        "fetch", "inf-1", 1, 1, 99, np.full(2410, 7.0, "<f4").tobytes(),
        max_chunk=1024, key=derive_worker_key(secret, "inf-2"),
    )[0]  # fmt: skip
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    pub.publish(wire.topic_down("fetch", "inf-1"), forged, 1, True).wait_for_publish(10)
    pub.loop_stop()
    pub.disconnect()
    datafile.write_file(str(tmp_path / "rows.bin"), X_test.tolist(), [0] * len(X_test))
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="fetch", worker_id="inf-1", model=SPEC,
        mode="infer", data="rows.bin", max_iterations=0, verbose=True,
        hmac_key=derive_worker_key(secret, "inf-1").hex(),
    )  # fmt: skip
    # a serve no worker trains with: its model stays the one it started with
    job = serve(mosquitto.port, "fetch", tmp_path, "--hmac-key-file", str(master),
                "--max-time", "20")  # fmt: skip
    try:
        # Execute
        board = subprocess.run(
            [micropython, str(FIRMWARE / "main.py"), str(cfg)], capture_output=True,
            text=True, timeout=120, env=MPY_ENV, cwd=tmp_path,
        )  # fmt: skip
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=10)
    # Assert: the forgery was dropped on its tag; the model is serve's, card
    # and all; the board left without a push and predicted every row
    text = board.stdout + board.stderr
    assert board.returncode == 0, text
    assert "dropped message: wire:hmac" in text
    assert "fetched job fetch's model into model.bin" in text
    assert "came unsigned" not in text  # it holds its key
    kept = mpy_export.read(tmp_path / "model.bin")
    assert np.array_equal(kept.params, load_checkpoint(tmp_path / "job.npz").params)
    assert kept.card.classes == tuple(NAMES) and kept.card.scaler is not None
    assert len(predictions(board.stdout)) == len(X_test)
    summary = json.loads(out.strip().splitlines()[-1])
    row = summary["workers"]["inf-1"]
    assert row["accepted"] == 0 and row["rejected"] == 0, row
    assert summary["dropped"].get("hmac", 0) == 0, err
