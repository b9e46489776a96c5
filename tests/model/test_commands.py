"""`edgeps export` and `edgeps predict` on a checkpoint, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from edgeps.cli import main
from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.scaler import Scaler
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint

CLASSES = ("ant", "bee", "cat")


def _job(tmp_path: Path) -> tuple[Path, Path, TrainedModel, np.ndarray, np.ndarray]:
    """A checkpoint of a softmax model fitted in closed form, and labelled rows."""
    rng = np.random.default_rng(0)
    centres = np.array([[100.0, 0.0], [0.0, 100.0], [100.0, 100.0]])
    y = rng.integers(0, 3, size=60)
    X = centres[y] + rng.normal(scale=10.0, size=(60, 2)) + 1000.0
    scaler = Scaler.fit(X)
    spec = ModelSpec.parse("softmax:2x3")
    Z = scaler.transform(centres + 1000.0)
    W = Z.T * 5.0  # each class's weight points at its centre
    b = -0.5 * 5.0 * np.sum(Z * Z, axis=1)
    params = np.concatenate([W.reshape(-1), b]).astype(np.float32)
    model = TrainedModel(ModelCard(spec, CLASSES, scaler), params)
    ckpt = tmp_path / "job.npz"
    meta = {**model.card.to_dict(), "job": "t", "accuracy": 1.0}
    save_checkpoint(ckpt, Checkpoint(params=params, version=7, meta=meta))
    data = tmp_path / "rows.csv"
    data.write_text(
        "x1,x2,kind\n"
        + "".join(
            f"{a:.6g},{c:.6g},{CLASSES[t]}\n" for (a, c), t in zip(X, y, strict=True)
        )
    )
    return ckpt, data, model, X, y


@pytest.mark.parametrize("fmt", ["json", "onnx", "npz", "micropython"])
def test_predict_scores_a_labelled_file_from_each_model_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    # Prepare
    if fmt == "onnx":
        pytest.importorskip("onnxruntime")
    ckpt, data, model, X, y = _job(tmp_path)
    path = ckpt
    if fmt != "npz":
        path = tmp_path / ("m.bin" if fmt == "micropython" else f"m.{fmt}")
        assert main(["export", str(ckpt), "--format", fmt, "--out", str(path)]) == 0
    capsys.readouterr()
    # Execute
    code = main(["predict", str(path), "--data", str(data), "--json"])
    # Assert
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["predictions"] == [CLASSES[i] for i in model.predict(X)]
    assert result["accuracy"] == pytest.approx(float(np.mean(model.predict(X) == y)))
    assert np.sum(result["confusion"]) == len(y) and result["classes"] == list(CLASSES)


def test_predict_without_labels_prints_one_class_per_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt, _, model, X, _ = _job(tmp_path)
    rows = tmp_path / "new.csv"
    rows.write_text("".join(f"{a},{b}\n" for a, b in X[:5]))
    assert main(["predict", str(ckpt), "--data", str(rows)]) == 0
    out = capsys.readouterr()
    assert out.out.split() == [CLASSES[i] for i in model.predict(X[:5])]
    assert "accuracy" not in out.err


def test_predict_text_report_has_the_confusion_matrix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt, data, *_ = _job(tmp_path)
    assert main(["predict", str(ckpt), "--data", str(data), "--label", "kind"]) == 0
    err = capsys.readouterr().err
    assert "accuracy" in err and "<- predicted" in err and "bee" in err


def test_export_default_path_and_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ckpt, *_ = _job(tmp_path)
    assert main(["export", str(ckpt), "--format", "c"]) == 0
    header = (tmp_path / "job.h").read_text()
    assert "JOB_N_FEATURES 2" in header and '"ant", "bee", "cat"' in header
    assert main(["export", str(tmp_path / "none.npz"), "--format", "json"]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_regression_model_reports_r2_and_mae(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare: y = 2 x1 - x2 exactly
    spec = ModelSpec.parse("linear:2")
    params = np.array([2.0, -1.0, 0.0], dtype=np.float32)
    ckpt = tmp_path / "lin.npz"
    meta = ModelCard(spec).to_dict()
    save_checkpoint(ckpt, Checkpoint(params=params, version=1, meta=meta))
    data = tmp_path / "d.csv"
    data.write_text("1,2,0\n3,1,5\n2,2,2.5\n")
    # Execute
    assert main(["predict", str(ckpt), "--data", str(data), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    # Assert
    assert result["predictions"] == [0.0, 5.0, 2.0]
    assert result["mae"] == pytest.approx(0.5 / 3)
    assert 0.9 < result["r2"] < 1.0


def test_predict_warns_when_an_extra_column_is_taken_as_the_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare: the model's 2 features and an extra column of ids, no label
    ckpt, data, model, X, _ = _job(tmp_path)
    extra = tmp_path / "extra.csv"
    extra.write_text("".join(f"{a},{b},{i % 3}\n" for i, (a, b) in enumerate(X)))
    # Execute
    code = main(["predict", str(ckpt), "--data", str(extra)])
    # Assert: it still scores, and says which column it took and how to say so
    err = capsys.readouterr().err
    assert code == 0
    assert (
        f"edgeps predict: warning: {extra} has 3 columns and the model takes 2 "
        "features: the last column is taken as the labels" in err
    )
    assert "give the file a header row and --label NAME" in err
    # the model's class names as labels, or --label: no warning
    for args in ([], ["--label", "kind"]):
        assert main(["predict", str(ckpt), "--data", str(data), *args]) == 0
        assert "warning" not in capsys.readouterr().err
