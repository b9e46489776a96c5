"""`edgeps export`, `predict` and `info` on conv checkpoints from a short training.

A 1-D network learns three tones in noisy windows and a LeNet-5-shaped one
three stroke shapes in small noisy images, with the numpy kernels and Adam;
each checkpoint is exported in every format that takes conv models and each
export predicts the held-out rows as the trained model does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from edgeps.cli import main
from edgeps.kernels import ModelSpec, get_backend, make_optimizer
from edgeps.kernels.layers import default_conv1d, lenet5
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.scaler import Scaler
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint

FORMATS = ["onnx", "json", "micropython"]
TONES = ("slow", "mid", "fast")
SHAPES = ("row", "column", "cross")


def tone_windows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Windows of 2 channels x 32 samples: a tone of 2, 5 or 9 cycles, a random
    phase, noise, and a large offset per channel (what the scaler removes)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    t = np.arange(32) / 32.0
    cycles = np.array([2.0, 5.0, 9.0])[y][:, None, None]
    phase = rng.uniform(0, 2 * np.pi, size=(n, 2, 1))
    X = np.sin(2 * np.pi * cycles * t + phase) + rng.normal(0, 0.3, (n, 2, 32))
    X = X * np.array([1.0, 40.0])[None, :, None] + np.array([5.0, 900.0])[None, :, None]
    return X.reshape(n, -1).astype(np.float32), y


def stroke_images(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """16x16 images of a row, a column or a cross of bright pixels, anywhere."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    X = rng.normal(0.0, 0.2, size=(n, 16, 16))
    for i, k in enumerate(y):
        r, c = rng.integers(3, 13, size=2)
        if k in (0, 2):
            X[i, r, 2:14] += 1.0
        if k in (1, 2):
            X[i, 2:14, c] += 1.0
    return (X * 50.0 + 100.0).reshape(n, 1, 256).reshape(n, -1).astype(np.float32), y


def train(
    text: str, X: np.ndarray, y: np.ndarray, classes: tuple[str, ...], steps: int
) -> TrainedModel:
    """Minibatch Adam on the numpy kernels, the way a worker steps."""
    spec = ModelSpec.parse(text)
    scaler = Scaler.fit(X)
    Z = scaler.transform(X)
    kernels = get_backend("numpy")
    params = spec.init_params(0)
    opt = make_optimizer("adam", spec.n_params)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        idx = rng.integers(0, len(y), size=32)
        _, grad = kernels.loss_and_grad(spec, params, Z[idx], y[idx].astype(np.int32))
        opt.step(params, grad, 0.01)
    return TrainedModel(ModelCard(spec, classes, scaler), params)


def job(tmp_path: Path, which: str) -> tuple[Path, Path, TrainedModel, np.ndarray]:
    """The checkpoint of a trained model and a labelled held-out .npz."""
    if which == "conv1d":
        X, y = tone_windows(600, 0)
        text, classes, steps = default_conv1d((2, 32), 3), TONES, 150
    else:
        X, y = stroke_images(600, 0)
        text, classes, steps = lenet5((1, 16, 16), 3), SHAPES, 200
    model = train(text, X[:400], y[:400], classes, steps)
    ckpt = tmp_path / f"{which}.npz"
    acc = float(np.mean(model.predict(X[400:]) == y[400:]))
    meta = {**model.card.to_dict(), "job": which, "accuracy": acc}
    save_checkpoint(ckpt, Checkpoint(params=model.params, version=3, meta=meta))
    held = tmp_path / "held.npz"
    np.savez(held, X=X[400:], y=np.array([classes[i] for i in y[400:]]))
    return ckpt, held, model, X[400:]


@pytest.fixture(scope="module", params=["conv1d", "lenet5"])
def trained(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path, TrainedModel, np.ndarray]:
    return job(tmp_path_factory.mktemp(request.param), request.param)


def test_the_short_training_learns(
    trained: tuple[Path, Path, TrainedModel, np.ndarray],
    capsys: pytest.CaptureFixture[str],
) -> None:
    ckpt, held, model, X = trained
    assert main(["predict", str(ckpt), "--data", str(held), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["accuracy"] >= 0.9, result["accuracy"]
    assert result["model"] == str(model.spec)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_export_predicts_the_held_out_rows_as_the_checkpoint(
    trained: tuple[Path, Path, TrainedModel, np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fmt: str,
) -> None:
    # Prepare
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    ckpt, held, model, X = trained
    out = tmp_path / ("model.bin" if fmt == "micropython" else f"m.{fmt}")
    # Execute
    code = main(["export", str(ckpt), "--format", fmt, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert main(["predict", str(out), "--data", str(held), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    # Assert
    names = model.card.class_names()
    want = [names[i] for i in model.predict(X)]
    agree = np.mean([a == b for a, b in zip(result["predictions"], want, strict=True)])
    assert agree == 1.0 if fmt != "onnx" else agree >= 0.99  # float32 order of sums
    assert result["accuracy"] >= 0.9
    assert model.spec.ops[0].op in err and "params" in err  # the architecture line


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_info_shows_the_architecture_of_a_checkpoint_and_an_export(
    trained: tuple[Path, Path, TrainedModel, np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    suffix: str,
) -> None:
    ckpt, _, model, _ = trained
    path = ckpt
    if suffix == ".json":
        path = tmp_path / "m.json"
        assert main(["export", str(ckpt), "--format", "json", "--out", str(path)]) == 0
    capsys.readouterr()
    assert main(["info", str(path), "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert view["spec"] == str(model.spec) and view["params"] == model.spec.n_params
    assert view["macs"] == model.spec.macs and view["scaled"] is True
    assert [ly["out_shape"] for ly in view["layers"]] == [
        list(op.out_shape) for op in model.spec.ops
    ]
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    first = model.spec.ops[0]
    assert f"conv {'x'.join(map(str, first.out_shape))} -> " in text
    assert f"{model.spec.n_params:,} params" in text
    if suffix == ".npz":
        assert "version       3" in text


def test_info_on_a_missing_model_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["info", str(tmp_path / "none.onnx")]) == 2
    err = capsys.readouterr().err
    assert "no model file" in err and "Traceback" not in err
