"""`edgeps worker --infer`: a board's model file predicts each row of a local file."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.cli import main
from edgeps.model.writers import export

from tests.helpers.infer_model import train


def _files(tmp_path: Path) -> tuple[Path, Path, Any, np.ndarray]:
    model, X, y = train("mlp:30-8-2", "breast_cancer", steps=100)
    mbin = export(model, "micropython", tmp_path / "model.bin")
    rows = tmp_path / "rows.csv"
    names = ",".join(f"f{i}" for i in range(X.shape[1]))
    lines = [
        ",".join(f"{v:.9g}" for v in r) + f",{t}" for r, t in zip(X, y, strict=True)
    ]
    rows.write_text("\n".join([f"{names},label", *lines]) + "\n")
    return mbin, rows, model, X


def _preds(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line.split(" ", 2)[2])
        for line in text.splitlines()
        if line.startswith("pred ")
    ]


def test_infer_prints_a_board_message_per_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare
    mbin, rows, model, X = _files(tmp_path)
    # Execute
    code = main(["worker", "--infer", "--model-file", str(mbin), "--data", str(rows)])
    # Assert
    assert code == 0
    preds = _preds(capsys.readouterr().out)
    want = model.predict(X).tolist()
    assert [p["value"] for p in preds] == want
    assert [p["class"] for p in preds] == [f"k{v}" for v in want]
    assert {p["id"] for p in preds} == {"worker"}


@pytest.mark.parametrize(
    "args",
    [
        ["--data", "x.csv"],  # training needs --broker, --job and --id
        ["--infer", "--emulated", "iris"],
        ["--infer", "--data", "x.csv", "--publish"],  # no broker to publish to
    ],
)
def test_infer_flag_mistakes_are_config_errors(args: list[str]) -> None:
    assert main(["worker", *args]) == 2


@pytest.mark.integration
def test_infer_publishes_each_prediction(tmp_path: Path, mosquitto: Any) -> None:
    # Prepare
    import paho.mqtt.client as mqtt

    mbin, rows, model, X = _files(tmp_path)
    got: list[tuple[str, dict[str, Any]]] = []
    ready = threading.Event()
    sub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    sub.on_message = lambda c, u, m: got.append((m.topic, json.loads(m.payload)))
    sub.on_subscribe = lambda *a: ready.set()
    sub.connect("127.0.0.1", mosquitto.port)
    sub.subscribe("edgeps/#", qos=0)
    sub.loop_start()
    try:
        assert ready.wait(10)
        # Execute
        code = main(
            ["worker", "--infer", "--model-file", str(mbin), "--data", str(rows),
             "--publish", "--broker", mosquitto.url, "--job", "j", "--id", "pi-1"]
        )  # fmt: skip
        pause = threading.Event()
        for _ in range(50):
            if len(got) >= len(X):
                break
            pause.wait(0.1)
    finally:
        sub.loop_stop()
        sub.disconnect()
    # Assert
    assert code == 0
    assert {t for t, _ in got} == {"edgeps/j/pred/pi-1"}
    assert [m["value"] for _, m in got] == model.predict(X).tolist()
