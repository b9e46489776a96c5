"""The job's test data: the spec, classes and scaler a --test-data file fixes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint
from edgeps.runtime.config import ServeConfig
from edgeps.runtime.job import build_server, load_model


def _iris_like(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    names = ("setosa", "versicolor", "virginica")
    y = rng.integers(0, 3, size=30)
    X = rng.normal(size=(30, 4)) * 50 + 300
    f = tmp_path / "test.csv"
    f.write_text(
        "a,b,c,d,species\n"
        + "".join(
            ",".join([*(f"{v:g}" for v in r), names[t]]) + "\n"
            for r, t in zip(X, y, strict=True)
        )
    )
    return f


def test_short_model_completes_from_the_test_file(tmp_path: Path) -> None:
    # Prepare
    f = _iris_like(tmp_path)
    # Execute
    model = load_model(ServeConfig(test_data=str(f), model="mlp:16"))
    # Assert
    assert str(model.spec) == "mlp:4-16-3"
    assert model.card is not None and model.card.classes == (
        "setosa",
        "versicolor",
        "virginica",
    )
    assert model.card.scaler is not None
    np.testing.assert_allclose(model.X_test.mean(axis=0), 0.0, atol=1e-4)


def test_no_scale_keeps_raw_features_and_default_model(tmp_path: Path) -> None:
    f = _iris_like(tmp_path)
    model = load_model(ServeConfig(test_data=str(f), scale=False))
    assert model.card is not None and model.card.scaler is None
    assert str(model.spec) == "mlp:4-32-3"
    assert float(model.X_test.mean()) > 100


def test_scaler_from_another_file(tmp_path: Path) -> None:
    f = _iris_like(tmp_path)
    other = tmp_path / "train.csv"
    other.write_text("a,b,c,d,species\n0,0,0,0,setosa\n2,2,2,2,virginica\n")
    model = load_model(ServeConfig(test_data=str(f), scaler_from=str(other)))
    assert model.card is not None and model.card.scaler is not None
    np.testing.assert_allclose(model.card.scaler.mean, 1.0)


@pytest.mark.parametrize(
    ("model", "message"),
    [("mlp:5-16-3", "takes 5 features"), ("logistic", "logistic needs 2 classes")],
)
def test_a_model_that_does_not_fit_the_file_is_refused(
    tmp_path: Path, model: str, message: str
) -> None:
    f = _iris_like(tmp_path)
    with pytest.raises(ValueError, match=message):
        load_model(ServeConfig(test_data=str(f), model=model))


def test_builtin_dataset_still_works_without_a_scaler() -> None:
    model = load_model(ServeConfig(dataset="sensors"))
    assert model.card is not None and model.card.scaler is None
    assert model.card.classes is not None and model.card.classes[0] == "still"


def test_a_csv_given_as_dataset_points_to_test_data() -> None:
    with pytest.raises(ValueError, match="--test-data iris.csv"):
        load_model(ServeConfig(dataset="iris.csv"))


def test_resume_refuses_a_checkpoint_of_other_classes(tmp_path: Path) -> None:
    # Prepare: a checkpoint of the same shape whose job named its classes otherwise
    f = _iris_like(tmp_path)
    cfg = ServeConfig(test_data=str(f), model="mlp:16")
    model = load_model(cfg)
    assert model.card is not None
    meta = {**model.card.to_dict(), "classes": ["a", "b", "c"]}
    ckpt = tmp_path / "old.npz"
    save_checkpoint(ckpt, Checkpoint(model.spec.init_params(0), 3, meta=meta))
    cfg.resume = str(ckpt)
    # Execute / Assert
    with pytest.raises(ValueError, match="classes"):
        build_server(cfg, model)
    save_checkpoint(
        ckpt, Checkpoint(model.spec.init_params(0), 3, meta=model.card.to_dict())
    )
    server, _ = build_server(cfg, model)
    assert server.version == 3


def test_npz_test_data_with_text_labels(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    f = tmp_path / "test.npz"
    y = np.array(["low", "high", "mid"] * 10)
    np.savez(f, X=rng.normal(size=(30, 6)), y=y)
    model = load_model(ServeConfig(test_data=str(f), model="softmax"))
    assert str(model.spec) == "softmax:6x3"
    assert model.card is not None and model.card.classes == ("high", "low", "mid")
    assert model.y_test[:3].tolist() == [1, 0, 2]
