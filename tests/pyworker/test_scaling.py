"""A worker's data file made ready for the job: scaled features, named labels."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import ModelSpec
from edgeps.pyworker.localdata import LocalData
from edgeps.pyworker.scaling import check_classes, load_local, looks_unscaled


def _args(data: Path, **kw: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "data": str(data),
        "label": None,
        "classes": None,
        "scale": False,
        "scaler_from": None,
    }
    base.update(kw)
    return argparse.Namespace(**base)


def _raw_csv(tmp_path: Path, name: str = "d.csv", offset: float = 500.0) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3)) * [100.0, 1.0, 0.5] + offset
    labels = np.where(rng.random(40) < 0.5, "yes", "no")
    f = tmp_path / name
    f.write_text(
        "a,b,c,answer\n"
        + "".join(f"{r[0]},{r[1]},{r[2]},{t}\n" for r, t in zip(X, labels, strict=True))
    )
    return f


def test_raw_file_is_warned_about_only_when_the_job_has_no_scaler(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Prepare: raw features, the documented way: the job's scaler applies
    from edgeps.pyworker.trainer import NativeTrainer

    f = _raw_csv(tmp_path)
    with caplog.at_level(logging.WARNING, logger="edgeps.pyworker"):
        data = load_local(_args(f))
        trainer = NativeTrainer(ModelSpec.parse("logistic:3"), data, batch=8)
        scale = np.concatenate([data.X.mean(axis=0), 1 / data.X.std(axis=0)])
        # Execute: a WELCOME with the job's scaler, then (another job) none
        trainer.set_scale(scale.astype("<f4").tobytes())
        with_scaler = caplog.text
        trainer.set_scale(None)
        trainer.set_scale(None)
    # Assert: loaded raw, no word until a job without a scaler; then once
    assert looks_unscaled(data.X)
    assert "look unscaled" not in with_scaler
    assert caplog.text.count("look unscaled") == 1
    assert "the job has no scaler" in caplog.text and "--scale" in caplog.text


def test_scale_standardises_by_the_files_own_moments(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    f = _raw_csv(tmp_path)
    with caplog.at_level(logging.WARNING, logger="edgeps.pyworker"):
        data = load_local(_args(f, scale=True))
    np.testing.assert_allclose(data.X.mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(data.X.std(axis=0), 1.0, atol=1e-3)
    assert "job's scaler" in caplog.text and not looks_unscaled(data.X)
    assert data.classes == ("no", "yes")


def test_scaler_from_a_shared_file(tmp_path: Path) -> None:
    f = _raw_csv(tmp_path)
    shared = _raw_csv(tmp_path, "shared.csv", offset=0.0)
    data = load_local(_args(f, scaler_from=str(shared)))
    # the shared file is centred 500 lower: every feature sits well above 0
    assert float(data.X[:, 1].mean()) > 100


def test_classes_must_fit_the_jobs_model(tmp_path: Path) -> None:
    # a file with some of the job's classes trains (the WELCOME renumbers
    # them), one with more names than the model has classes is refused
    data = load_local(_args(_raw_csv(tmp_path), classes="no,yes", scale=True))
    check_classes(ModelSpec.parse("logistic:3"), data, given=True)
    check_classes(ModelSpec.parse("mlp:3-8-3"), data, given=True)
    three = LocalData(data.X, data.y, "three.csv", ("a", "b", "c"))
    with pytest.raises(ValueError, match="has 2"):
        check_classes(ModelSpec.parse("logistic:3"), three, given=True)
