"""`edgeps worker --model-out` keeps the job's final model; `edgeps worker --infer
--fetch` takes a running job's model with its key. Both against `edgeps serve`
on a real mosquitto, on raw CSV rows with named classes (the job's scaler and
class names travel in its WELCOME)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.cli import main
from edgeps.model import mpy_export
from edgeps.runtime.checkpoint import load_checkpoint
from edgeps.workloads.datasets import load_dataset

pytestmark = [pytest.mark.slow, pytest.mark.integration]
NAMES = ["benign", "malignant"]


def write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    lines = [",".join(f"f{j}" for j in range(X.shape[1])) + ",label"]
    lines += [
        ",".join(f"{v:.6g}" for v in row) + f",{NAMES[int(c)]}"
        for row, c in zip(X, y, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def job_files(tmp_path: Path) -> None:
    """Raw (not standardised) rows: train.csv for the worker, test.csv for serve."""
    ds = load_dataset("breast_cancer", seed=0)
    write_csv(tmp_path / "train.csv", ds.X_train * 4.0 + 2.0, ds.y_train)
    write_csv(tmp_path / "test.csv", ds.X_test * 4.0 + 2.0, ds.y_test)


def serve(url: str, job: str, tmp_path: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", url, "--job", job,
         "--model", "mlp:30-8-2", "--test-data", str(tmp_path / "test.csv"),
         "--label", "label", "--policy", "asp", "--checkpoint",
         str(tmp_path / "job.npz"), "--quiet", "--json", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_worker_keeps_the_final_model_of_a_job_with_local_rounds(
    mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: local rounds (the model kept is the last release, not the
    # parameters the last round moved)
    job_files(tmp_path)
    host = serve(mosquitto.url, "kept", tmp_path, "--local-steps", "4",
                 "--target-accuracy", "0.9", "--max-time", "40")  # fmt: skip
    try:
        # Execute
        worker = subprocess.run(
            [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
             "--job", "kept", "--id", "pi-1", "--data", str(tmp_path / "train.csv"),
             "--label", "label", "--model-out", str(tmp_path / "pi.bin")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        out, err = host.communicate(timeout=60)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(timeout=10)
    # Assert: what serve evaluated and checkpointed, card and all
    assert worker.returncode == 0, worker.stderr
    assert "kept the job's model in" in worker.stderr
    assert json.loads(out.strip().splitlines()[-1])["stop_reason"] in (
        "target_accuracy",
        "max_time",
    ), err
    kept = mpy_export.read(tmp_path / "pi.bin")
    assert np.array_equal(kept.params, load_checkpoint(tmp_path / "job.npz").params)
    assert kept.card.classes == tuple(NAMES) and kept.card.scaler is not None


def test_infer_fetch_takes_a_running_jobs_model_and_refuses_a_forgery(
    mosquitto: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Prepare: a keyed job no worker trains with (its model stays the one it
    # started with); an unsigned PARAMS waits (retained) on the fetcher's topic
    import paho.mqtt.client as mqtt
    from edgeps_worker import wire_host as wire

    job_files(tmp_path)
    master = tmp_path / "master.key"
    assert main(["keys", "new", "--out", str(master)]) == 0
    assert main(["keys", "derive", "--master", str(master), "--worker", "pi-9",
                 "--out", str(tmp_path / "pi-9.key")]) == 0  # fmt: skip
    n = 30 * 8 + 8 + 8 * 2 + 2
    forged = wire.encode_params(
        "fetch", "pi-9", 1, 1, 99, np.full(n, 7.0, "<f4").tobytes()
    )[0]
    pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    pub.publish(wire.topic_down("fetch", "pi-9"), forged, 1, True).wait_for_publish(10)
    pub.loop_stop()
    pub.disconnect()
    host = serve(mosquitto.url, "fetch", tmp_path, "--hmac-key-file", str(master),
                 "--max-time", "15")  # fmt: skip
    model = tmp_path / "model.bin"
    caplog.set_level(logging.INFO)
    try:
        # Execute
        code = main(
            ["worker", "--infer", "--fetch", "--broker", mosquitto.url, "--job",
             "fetch", "--id", "pi-9", "--hmac-key-file", str(tmp_path / "pi-9.key"),
             "--model-file", str(model), "--data", str(tmp_path / "test.csv")]
        )  # fmt: skip
        out, err = host.communicate(timeout=60)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait(timeout=10)
    # Assert: the forgery dropped on its missing tag; serve's model and card,
    # predicting every row; nothing pushed
    assert code == 0
    assert "dropped message: wire:hmac" in caplog.text
    assert "fetched unsigned" not in caplog.text  # it held its key
    kept = mpy_export.read(model)
    assert np.array_equal(kept.params, load_checkpoint(tmp_path / "job.npz").params)
    assert kept.card.classes == tuple(NAMES) and kept.card.scaler is not None
    preds = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("pred")]
    assert len(preds) == len(load_dataset("breast_cancer", seed=0).y_test)
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["workers"]["pi-9"]["accepted"] == 0, err
