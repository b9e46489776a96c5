"""A model trained on the host predicts on the board: `edgeps export --format
micropython`, then the board's inference mode under the real MicroPython
binary, against onnxruntime on the ONNX export of the same checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.cli import main as cli
from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.writers import export
from edgeps_worker import datafile

from tests.conftest import FIRMWARE, run_micropython
from tests.helpers.infer_model import checkpoint, train

pytestmark = [pytest.mark.firmware]
CASES = [
    ("mlp:64-16-10", "digits"),
    ("softmax:64x10", "digits"),
    ("logistic:30", "breast_cancer"),
]


def export_both(tmp_path: Path, spec: str, dataset: str) -> tuple[Path, Path, Any]:
    """model.bin and model.onnx of a freshly trained checkpoint; held-out rows."""
    model, X, _ = train(spec, dataset)
    ckpt = checkpoint(model, tmp_path / "job.npz")
    mbin, monnx = tmp_path / "model.bin", tmp_path / "model.onnx"
    for fmt, out in (("micropython", mbin), ("onnx", monnx)):
        assert cli(["export", str(ckpt), "--format", fmt, "--out", str(out)]) == 0
    return mbin, monnx, (model, X)


def board_config(tmp_path: Path, spec: str, **changes: Any) -> Path:
    cfg = {
        "job": "inf",
        "worker_id": "b1",
        "model": spec,
        "mode": "infer",
        "model_file": str(tmp_path / "model.bin"),
        "broker_host": "",
        "data": str(tmp_path / "rows.bin"),
    }
    cfg.update(changes)
    path = tmp_path / "board.json"
    path.write_text(json.dumps(cfg))
    return path


def board_predictions(micropython: str, config: Path) -> list[dict[str, Any]]:
    """What a board process prints for each prediction, in order."""
    run = run_micropython(micropython, str(FIRMWARE / "main.py"), str(config))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "stopped: done" in run.stdout
    return [
        json.loads(line.split(" ", 2)[2])
        for line in run.stdout.splitlines()
        if line.startswith("pred ")
    ]


@pytest.mark.slow
@pytest.mark.parametrize(("spec", "dataset"), CASES)
def test_board_predicts_as_onnxruntime_and_again_after_a_restart(
    micropython: str, tmp_path: Path, spec: str, dataset: str
) -> None:
    # Prepare
    ort = pytest.importorskip("onnxruntime")
    _, monnx, (model, X) = export_both(tmp_path, spec, dataset)
    datafile.write_file(str(tmp_path / "rows.bin"), X.tolist(), [0] * len(X))
    session = ort.InferenceSession(str(monnx), providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": X})[1].reshape(-1)
    config = board_config(tmp_path, spec)
    names = model.card.class_names()
    # Execute: a board process, then a new one (a reboot) on the same files
    first = board_predictions(micropython, config)
    again = board_predictions(micropython, config)
    # Assert
    for preds in (first, again):
        assert len(preds) == len(X)
        got = np.array([p["value"] for p in preds])
        assert np.mean(got == want) >= 0.99
        assert all(p["class"] == names[p["value"]] and p["id"] == "b1" for p in preds)
    assert first == again


def test_a_model_file_of_another_model_is_refused(
    micropython: str, tmp_path: Path
) -> None:
    # Prepare
    export_both(tmp_path, "logistic:30", "breast_cancer")
    datafile.write_file(str(tmp_path / "rows.bin"), [[0.0] * 30], [0])
    config = board_config(tmp_path, "logistic:29")
    # Execute
    run = run_micropython(micropython, str(FIRMWARE / "main.py"), str(config))
    # Assert
    assert run.returncode == 2
    assert "holds logistic:30, the config says model logistic:29" in run.stdout


@pytest.mark.integration
def test_board_publishes_each_prediction_on_its_pred_topic(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare
    import paho.mqtt.client as mqtt

    _, _, (model, X) = export_both(tmp_path, "logistic:30", "breast_cancer")
    rows = X[:20]
    datafile.write_file(str(tmp_path / "rows.bin"), rows.tolist(), [0] * len(rows))
    config = board_config(
        tmp_path, "logistic:30", broker_host="127.0.0.1", broker_port=mosquitto.port
    )
    got: list[tuple[str, dict[str, Any]]] = []
    subscribed = threading.Event()
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    sub.on_message = lambda c, u, m: got.append((m.topic, json.loads(m.payload)))
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.connect("127.0.0.1", mosquitto.port)
    sub.subscribe("edgeps/inf/pred/#", qos=0)
    sub.loop_start()
    try:
        assert subscribed.wait(10)
        # Execute
        preds = board_predictions(micropython, config)
        deadline = threading.Event()
        for _ in range(50):
            if len(got) >= len(rows):
                break
            deadline.wait(0.1)
    finally:
        sub.loop_stop()
        sub.disconnect()
    # Assert
    assert [t for t, _ in got] == ["edgeps/inf/pred/b1"] * len(rows)
    assert [m for _, m in got] == preds
    assert [p["value"] for p in preds] == model.predict(rows).tolist()


def test_a_training_board_never_loads_the_inference_code(
    micropython: str, tmp_path: Path
) -> None:
    # Prepare: a training config whose broker is not there
    datafile.write_file(str(tmp_path / "rows.bin"), [[0.0] * 3], [0])
    cfg = board_config(tmp_path, "logistic:3", mode="train", broker_host="127.0.0.1")
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys\n"
        "from edgeps_worker import app\n"
        "w = app.build(sys.argv[1])\n"
        "print(sorted(m for m in sys.modules if m.startswith('edgeps_worker')))\n"
    )
    # Execute
    run = run_micropython(micropython, str(script), str(cfg))
    # Assert
    assert run.returncode == 0, run.stderr
    for mod in ("infer", "predict", "kernels_eval", "keep", "fetch"):
        assert "edgeps_worker." + mod not in run.stdout


def test_self_supervised_board_predicts_the_next_reading(
    micropython: str, tmp_path: Path
) -> None:
    # Prepare: a linear model of a sine's next value from its last 8, fitted
    # on the host, and a sensor module reading that sine through next_value
    t = np.arange(400) * 0.3
    wave = np.sin(t)
    X = np.stack([wave[i : i + 8] for i in range(len(wave) - 8)])
    target = wave[8:]
    A = np.hstack([X, np.ones((len(X), 1))])
    coef = np.linalg.lstsq(A, target, rcond=None)[0].astype(np.float32)
    model = TrainedModel(ModelCard(ModelSpec.parse("linear:8")), coef)
    export(model, "micropython", tmp_path / "model.bin")
    (tmp_path / "sine.py").write_text(
        "import math\n"
        "from next_value import NextValue\n"
        "_t = [0]\n"
        "def sample():\n"
        "    _t[0] += 1\n"
        "    return math.sin((_t[0] - 1) * 0.3)\n"
        "read = NextValue(sample, 8).read\n"
    )
    config = board_config(
        tmp_path, "linear:8", data="", sensor="sine", max_iterations=30
    )
    env = dict(
        os.environ, MICROPYPATH=f"{tmp_path}:{FIRMWARE / 'sensors'}:{FIRMWARE}:.frozen"
    )
    # Execute
    run = subprocess.run(
        [micropython, str(FIRMWARE / "main.py"), str(config)],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )  # fmt: skip
    # Assert: the k-th prediction is of reading 8 + k, from readings k..k+7
    assert run.returncode == 0, run.stdout + run.stderr
    assert "stopped: iterations" in run.stdout
    preds = [
        json.loads(line.split(" ", 2)[2])
        for line in run.stdout.splitlines()
        if line.startswith("pred ")
    ]
    assert len(preds) == 30 and all(p["class"] is None for p in preds)
    got = np.array([p["value"] for p in preds])
    np.testing.assert_allclose(got, model.predict(X[:30]), atol=0.02)
    np.testing.assert_allclose(got, target[:30], atol=0.05)
