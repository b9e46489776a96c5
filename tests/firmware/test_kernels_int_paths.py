"""Every code path of the board kernels' integer matrix product against numpy.

Batch sizes 1 and odd, each activation and depth, label kinds, dot products
long enough to use the accumulator carries (over 64 and over 512 terms),
zeros, features of very different scales, inputs that are not finite and
results that overflow float32, forward passes wider than the scratch, and
the promise that every intermediate fits a signed 32-bit word (viper ints
on the ESP32 are 32 bits wide; the unix port's are 64, CPython's unbounded).
"""

from __future__ import annotations

import math
import sys
from array import array
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pytest
from edgeps.kernels import ModelSpec
from edgeps_worker import blockfp, kernels
from edgeps_worker.kernels import Model
from edgeps_worker.kernels_eval import Predictor

from tests.conftest import run_micropython
from tests.firmware.test_kernels import SCRIPT, make_case, reference

PATH_CASES = [
    ("linear:3", 1),
    ("logistic:5", 1),
    ("softmax:4x3", 1),
    ("mlp:6-5-3", 1),
    ("mlp:6-5-3:tanh", 3),
    ("mlp:7-6-5-4", 13),
    ("mlp:7-6-5-4:tanh", 13),
    ("logistic:600", 5),  # forward dot products of 601 terms: both carries
    ("softmax:3x4", 531),  # gradient dot products over 531 samples
    ("mlp:70-9-3", 33),
]


def _files(tmp_path: Path, params, X, y) -> list[str]:
    files = []
    for name, arr in (("p", params), ("x", X), ("y", y)):
        path = tmp_path / f"{name}.bin"
        path.write_bytes(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
        files.append(str(path))
    return files


def _run_board(micropython: str, tmp_path: Path, spec_text: str, params, X, y):
    """(loss, grad, forward outputs) from the kernels under MicroPython."""
    spec = ModelSpec.parse(spec_text)
    out = tmp_path / "out.bin"
    n = str(len(X))
    files = _files(tmp_path, params, X, y)
    proc = run_micropython(micropython, SCRIPT, spec_text, n, *files, str(out))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    raw = np.frombuffer(out.read_bytes(), dtype="<f4")
    return float(lines["loss"]), raw[: spec.n_params], raw[spec.n_params :]


def _assert_matches(spec, params, X, y, loss, grad, fwd) -> None:
    ref_loss, ref_grad, ref_fwd, _ = reference(spec, params, X, y)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(fwd, np.ravel(ref_fwd), rtol=1e-4, atol=1e-6)


@pytest.mark.firmware
@pytest.mark.parametrize(("spec_text", "n"), PATH_CASES)
def test_board_kernel_paths_match_numpy(micropython, tmp_path: Path, spec_text, n):
    # Prepare
    spec, params, X, y = make_case(spec_text, n, seed=23)
    # Execute
    loss, grad, fwd = _run_board(micropython, tmp_path, spec_text, params, X, y)
    # Assert
    _assert_matches(spec, params, X, y, loss, grad, fwd)


@pytest.mark.firmware
@pytest.mark.parametrize("spec_text", ["softmax:6x4", "mlp:6-5-3", "linear:6"])
def test_board_kernels_on_zeros_and_mixed_scales(micropython, tmp_path, spec_text):
    # Prepare: zero parameters, a zero row, features from 1e-3 to 1e3
    spec, params, X, y = make_case(spec_text, 7, seed=4)
    X[2] = 0.0
    X *= np.logspace(-3, 3, spec.n_features, dtype=np.float32)
    zeros = np.zeros_like(params)
    for p in (zeros, params):
        # Execute
        loss, grad, fwd = _run_board(micropython, tmp_path, spec_text, p, X, y)
        # Assert
        _assert_matches(spec, p, X, y, loss, grad, fwd)


def _cpython_step(spec_text: str, params, X, y, model: Model | None = None):
    model = model or Model(spec_text)
    grad = array("f", bytes(4 * model.n_params))
    kind = "f" if y.dtype == np.float32 else "i"
    loss = model.loss_and_grad(
        array("f", params.tobytes()), array("f", X.tobytes()), array(kind, y.tobytes()),
        len(X), grad,
    )  # fmt: skip
    return loss, np.asarray(grad)


@pytest.mark.parametrize(("spec_text", "n"), PATH_CASES[:7])
def test_cpython_kernel_paths_match_numpy(spec_text, n):
    # Prepare
    spec, params, X, y = make_case(spec_text, n, seed=8)
    model = Predictor(spec_text)  # scratch for one row: forward goes row by row
    # Execute
    loss, grad = _cpython_step(spec_text, params, X, y, Model(spec_text))
    out = array("f", bytes(4 * n * model.n_outputs))
    model.forward(array("f", params.tobytes()), array("f", X.tobytes()), n, out)
    # Assert
    _assert_matches(spec, params, X, y, loss, grad, np.asarray(out))


def test_float_labels_for_classifiers_are_class_ids():
    # Prepare
    spec, params, X, y = make_case("logistic:5", 6, seed=2)
    _, _, X2, y2 = make_case("softmax:5x3", 6, seed=2)
    # Execute
    as_int = _cpython_step("logistic:5", params, X, y)
    as_float = _cpython_step("logistic:5", params, X, y.astype(np.float32))
    p3 = make_case("softmax:5x3", 6, seed=2)[1]
    soft_int = _cpython_step("softmax:5x3", p3, X2, y2)
    soft_float = _cpython_step("softmax:5x3", p3, X2, y2.astype(np.float32))
    # Assert
    assert as_int[0] == as_float[0] and soft_int[0] == soft_float[0]
    np.testing.assert_array_equal(as_int[1], as_float[1])
    np.testing.assert_array_equal(soft_int[1], soft_float[1])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("where", ["params", "X"])
def test_non_finite_inputs_give_nan_loss_and_gradient(bad, where):
    # Prepare
    spec, params, X, y = make_case("mlp:6-5-3", 4, seed=1)
    (params if where == "params" else X).flat[3] = bad
    # Execute
    loss, grad = _cpython_step("mlp:6-5-3", params, X, y)
    # Assert
    assert math.isnan(loss) and np.isnan(grad).all()


def test_float32_overflow_gives_nan_not_garbage():
    # Prepare: finite inputs whose products exceed float32
    spec, params, X, y = make_case("mlp:6-5-3", 4, seed=1)
    params[:30] = 3e30
    X[:] = 1e20
    # Execute
    loss, grad = _cpython_step("mlp:6-5-3", params, X, y)
    # Assert
    assert math.isnan(loss) and np.isnan(grad).all()


INT32 = range(-(2**31), 2**31)
WATCHED = ("hh", "mid", "top", "hi", "lo", "m", "mg", "u", "h1", "l1", "h2", "l2")


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_matrix_product_intermediates_fit_32_bit_words(sign):
    # Prepare: the worst case, every mantissa all ones, 301-term dot products
    # of one sign, in the forward pass and over the batch, in two chunks so
    # that the second one is added to the first
    n_in, n = 300, kernels.ROWS + 1
    big = np.float32(1.9999999)
    X = np.full((n, n_in), big, np.float32)
    X *= sign
    params = np.full(n_in + 1, big, np.float32)
    y = ((np.arange(n) + (sign < 0)) % 2).astype(np.int32)  # last delta != 0
    seen: dict[str, int] = {}

    def watch(frame: FrameType, event: str, arg: Any):
        if frame.f_code is not blockfp.matmul.__code__:
            return None
        for name in WATCHED:
            value = frame.f_locals.get(name)
            if isinstance(value, int):
                assert value in INT32, (name, value)
                seen[name] = max(seen.get(name, 0), abs(value))
        return watch

    # Execute
    sys.settrace(watch)
    try:
        loss, grad = _cpython_step(f"logistic:{n_in}", params, X, y)
    finally:
        sys.settrace(None)
    # Assert: the carries were exercised and the result is still right
    assert set(WATCHED) <= set(seen) and seen["top"] > 0
    spec = ModelSpec.parse(f"logistic:{n_in}")
    ref_loss, ref_grad, _, _ = reference(spec, params, X, y)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-5)


def test_scratch_rows_do_not_change_results_beyond_float32_rounding():
    # Prepare: one chunk of 9 rows against chunks of 1 and of ROWS rows
    spec, params, X, y = make_case("mlp:6-5-3:tanh", 9, seed=6)
    assert kernels.ROWS < 9
    models = [Model("mlp:6-5-3:tanh", rows) for rows in (1, kernels.ROWS)]
    # Execute
    results = [_cpython_step("mlp:6-5-3:tanh", params, X, y, m) for m in models]
    # Assert
    assert [m.rows for m in models] == [1, kernels.ROWS]
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-5, atol=1e-7)
    _assert_matches(
        spec,
        params,
        X,
        y,
        results[1][0],
        results[1][1],
        np.ravel(reference(spec, params, X, y)[2]),
    )


@pytest.mark.parametrize(
    "call",
    [
        lambda m, p, X, g: m.loss_and_grad(p, X, array("i", [0] * 4), 4, g[:-1]),
        lambda m, p, X, g: m.loss_and_grad(p[:-1], X, array("i", [0] * 4), 4, g),
        lambda m, p, X, g: m.loss_and_grad(p, X[:-1], array("i", [0] * 4), 4, g),
        lambda m, p, X, g: m.loss_and_grad(p, X, array("i", [0] * 3), 4, g),
        lambda m, p, X, g: m.loss_and_grad(p, X, array("i", [0] * 4), 0, g),
        lambda m, p, X, g: m.forward(p, X, 5, array("f", bytes(60))),
        lambda m, p, X, g: m.predict_one(p, X, 4),
        lambda m, p, X, g: m.predict_one(p, X, -1),
    ],
)
def test_buffers_too_small_for_the_unchecked_reads_are_refused(call):
    # Prepare: 4 rows of 6 features
    model = Predictor("mlp:6-5-3")
    p = array("f", bytes(4 * model.n_params))
    g = array("f", bytes(4 * model.n_params))
    X = array("f", bytes(4 * 24))
    # Execute / Assert
    with pytest.raises(ValueError):
        call(model, p, X, g)
