"""The MicroPython model file (`--format micropython`): its bytes read back."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from edgeps.model import mpy_export
from edgeps.model.writers import export
from edgeps_worker.predict import Model

from tests.model.test_exports import _model, _raw

SPECS = ["linear:5", "logistic:5", "softmax:5x3", "mlp:5-20-4", "mlp:5-8-6-3:tanh"]


@pytest.mark.parametrize("text", SPECS)
@pytest.mark.parametrize("scaled", [True, False])
def test_the_file_reads_back_as_the_model(
    tmp_path: Path, text: str, scaled: bool
) -> None:
    # Prepare
    model = _model(text, scaled=scaled)
    # Execute
    path = export(model, "micropython", tmp_path / "model.bin", {"job": "t"})
    back = mpy_export.read(path)
    # Assert
    assert str(back.spec) == str(model.spec)
    assert back.card.classes == model.card.classes
    np.testing.assert_array_equal(back.params, model.params)
    if scaled:
        assert model.card.scaler is not None and back.card.scaler is not None
        pairs = zip(
            back.card.scaler.offset_scale(),
            model.card.scaler.offset_scale(),
            strict=True,
        )
        for a, b in pairs:
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    else:
        assert back.card.scaler is None
    X = _raw(50, 4)
    np.testing.assert_allclose(back.scores(X), model.scores(X), rtol=1e-5, atol=1e-5)


def test_the_header_is_as_documented(tmp_path: Path) -> None:
    # Prepare
    model = _model("softmax:5x3")
    # Execute
    data = mpy_export.to_bytes(model)
    # Assert: magic, version, flags, spec length, n_params, n_features, names
    assert struct.unpack_from("<4sBBHIHH", data) == (b"EPSM", 2, 1, 11, 18, 5, 3)
    assert data[16:27] == b"softmax:5x3"
    assert data[27:36] == b"\x02c0\x02c1\x02c2"
    assert len(data) == 36 + 4 * 18 + 2 * 4 * 5 + 4
    assert struct.unpack("<I", data[-4:]) == (zlib.crc32(data[:-4]),)
    params = np.frombuffer(data, "<f4", 18, 36)
    np.testing.assert_array_equal(params, model.params)


@pytest.mark.parametrize("text", ["logistic:5", "softmax:5x3", "mlp:5-8-6-3:tanh"])
def test_the_board_loader_predicts_as_the_host_under_cpython(
    tmp_path: Path, text: str
) -> None:
    # Prepare
    model = _model(text)
    path = export(model, "micropython", tmp_path / "model.bin")
    X = _raw(40, 5).astype(np.float32)
    # Execute
    board = Model(str(path))
    got = [board.predict(row.tolist()) for row in X]
    # Assert: the board's block floating point may flip a near tie, rarely
    want = model.predict(X)
    agree = np.mean([g[0] == w for g, w in zip(got, want, strict=True)])
    assert agree >= 0.95
    assert all(name == f"c{i}" for i, name in got)


def test_a_linear_model_gives_its_value_and_no_name(tmp_path: Path) -> None:
    model = _model("linear:5")
    path = export(model, "micropython", tmp_path / "model.bin")
    X = _raw(5, 6).astype(np.float32)
    board = Model(str(path))
    for row, want in zip(X, model.predict(X), strict=True):
        value, name = board.predict(row.tolist())
        assert name == "" and value == pytest.approx(float(want), rel=1e-2, abs=1e-2)


def test_a_truncated_or_foreign_file_is_refused(tmp_path: Path) -> None:
    path = export(_model("mlp:5-20-4"), "micropython", tmp_path / "model.bin")
    data = path.read_bytes()
    (tmp_path / "short.bin").write_bytes(data[:-8])
    (tmp_path / "other.bin").write_bytes(b"EPSD" + data[4:])
    for name in ("short.bin", "other.bin"):
        with pytest.raises(ValueError):
            mpy_export.read(tmp_path / name)
        with pytest.raises(ValueError):
            Model(str(tmp_path / name))
