"""MicroPython kernels (firmware/edgeps_worker/kernels.py) against the numpy reference.

Tolerance: the board computes one sample at a time in float32 storage with
double (unix port) or single (ESP32) accumulators, the reference vectorizes in
float32, so gradients agree to rtol 1e-4 / atol 1e-5 and losses to 1e-5
relative on inputs of unit scale.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from edgeps_worker.kernels import Model, parse_spec

from tests.conftest import REPO, run_micropython

SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_kernels.py")
CASES = [
    ("linear:8", 7),
    ("logistic:32", 16),
    ("softmax:64x10", 12),
    ("mlp:64-32-10", 10),
    ("mlp:12-9-7-4:tanh", 9),
    ("mlp:16-8-3:relu", 5),
]


def make_case(spec_text: str, n: int, seed: int):
    spec = ModelSpec.parse(spec_text)
    rng = np.random.default_rng(seed)
    params = spec.init_params(seed) + rng.normal(0, 0.05, spec.n_params).astype(
        np.float32
    )
    X = rng.normal(size=(n, spec.n_features)).astype(np.float32)
    if spec.kind == "linear":
        y = rng.normal(size=n).astype(np.float32)
    else:
        classes = 2 if spec.kind == "logistic" else spec.n_classes
        y = rng.integers(0, classes, size=n).astype(np.int32)
    return spec, params.astype(np.float32), X, y


def reference(spec, params, X, y):
    ref = get_backend("numpy")
    loss, grad = ref.loss_and_grad(spec, params, X, y)
    return loss, grad, ref.forward(spec, params, X), ref.predict(spec, params, X)


@pytest.mark.firmware
@pytest.mark.parametrize(("spec_text", "n"), CASES)
def test_micropython_kernels_match_numpy(micropython, tmp_path: Path, spec_text, n):
    # Prepare
    spec, params, X, y = make_case(spec_text, n, seed=11)
    files = []
    for name, arr in (("p", params), ("x", X), ("y", y)):
        path = tmp_path / f"{name}.bin"
        path.write_bytes(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
        files.append(str(path))
    out = tmp_path / "out.bin"
    # Execute
    proc = run_micropython(micropython, SCRIPT, spec_text, str(n), *files, str(out))
    # Assert
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    loss = float(lines["loss"])
    raw = np.frombuffer(out.read_bytes(), dtype="<f4")
    grad, fwd = raw[: spec.n_params], raw[spec.n_params :]
    ref_loss, ref_grad, ref_fwd, ref_pred = reference(spec, params, X, y)
    # the measured error, for reports (`pytest -s tests/firmware/test_kernels.py`)
    grad_err = float(np.max(np.abs(grad - ref_grad)))
    scale = float(np.max(np.abs(ref_grad)))
    print(
        f"\n{spec_text} B={n}: loss rel err {abs(loss - ref_loss) / abs(ref_loss):.2e}"
        f", grad max abs err {grad_err:.2e} (max |grad| {scale:.2e})"
    )
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fwd, np.ravel(ref_fwd), rtol=1e-4, atol=1e-6)
    preds = [float(p) for p in lines["preds"].split()]
    if spec.kind == "linear":
        np.testing.assert_allclose(preds, ref_pred, rtol=1e-4, atol=1e-5)
    else:
        assert preds == [float(p) for p in ref_pred]


@pytest.mark.parametrize(("spec_text", "n"), CASES[:4])
def test_same_kernels_on_cpython_match_numpy(spec_text, n):
    # Prepare
    spec, params, X, y = make_case(spec_text, n, seed=5)
    model = Model(spec_text)
    grad = array("f", bytes(4 * model.n_params))
    yb = array("f" if spec.kind == "linear" else "i", y.tobytes())
    # Execute
    loss = model.loss_and_grad(
        array("f", params.tobytes()), array("f", X.tobytes()), yb, n, grad
    )
    # Assert
    ref_loss, ref_grad, _, _ = reference(spec, params, X, y)
    assert model.n_params == spec.n_params
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    np.testing.assert_allclose(np.asarray(grad), ref_grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "text",
    [
        "linear:8",
        "logistic:32",
        "softmax:64x10",
        "mlp:64-32-10",
        "mlp:64-32-16-10:tanh",
    ],
)
def test_parse_spec_agrees_with_host_spec(text):
    spec = ModelSpec.parse(text)
    assert Model(text).n_params == spec.n_params
    _, sizes, act = parse_spec(text)
    assert sizes[0] == spec.n_features and act == spec.activation


@pytest.mark.parametrize(
    "text",
    [
        "",
        "mlp",
        "cnn:3",
        "softmax:64x1",
        "mlp:64-10",
        "mlp:1-2-3-4-5",
        "logistic:0",
        "linear:8:tanh",
        "mlp:4-4-2:sigmoid",
        "softmax:axb",
        7,
    ],
)
def test_parse_spec_rejects_bad_text(text):
    with pytest.raises(ValueError):
        parse_spec(text)


def test_label_out_of_range_raises():
    model = Model("softmax:2x3")
    with pytest.raises(ValueError):
        model.loss_and_grad(
            array("f", bytes(4 * model.n_params)),
            array("f", [1.0, 2.0]),
            array("i", [3]),
            1,
            array("f", bytes(4 * model.n_params)),
        )
