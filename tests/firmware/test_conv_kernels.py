"""The board's conv1d network (firmware/edgeps_worker/conv.py) against numpy.

Tolerance: products run in block floating point (blockfp.matmul: each term
off by less than 2**-21 of the largest possible term), partial sums are
added in float32 with truncation (a conv's chunks, a batch's windows), so
gradients agree to rtol 1e-4 / atol 2e-5 and losses to 1e-5 relative on
inputs of unit scale; measured errors are printed (``pytest -s``).
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from edgeps_worker import conv, kernels

from tests.conftest import REPO, run_micropython

SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_conv.py")
# three 16-filter conv+pool stages on MNIST-1D windows; 3 channels with a
# dense hidden layer and an average pool after a conv that follows a conv
# (the ReLU mask kept aside);
# strides and overlapping max pools; a pool first and gaps between windows
CASES = [
    ("conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10", 6),
    ("conv1d:3x64-c8k5p2-m2-c8k3-a2-d16-4", 5),
    ("conv1d:3x32-c6k3s2p1-c5k3-m3s2-6", 5),
    ("conv1d:2x50-m2-c4k3s2-m3-c3k3p1-m2s3-d5-3", 4),
]


def make_case(text: str, n: int, seed: int):
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(seed)
    params = spec.init_params(seed) + rng.normal(0, 0.05, spec.n_params)
    X = rng.normal(size=(n, spec.n_features)).astype(np.float32)
    y = rng.integers(0, spec.n_classes, size=n).astype(np.int32)
    return spec, params.astype(np.float32), X, y


def check(spec, params, X, y, loss, grad, probs):
    ref = get_backend("numpy")
    ref_loss, ref_grad = ref.loss_and_grad(spec, params, X, y)
    err = float(np.max(np.abs(grad - ref_grad)))
    top = float(np.max(np.abs(ref_grad)))
    print(f"\n{spec}: loss rel err {abs(loss - ref_loss) / ref_loss:.1e}, "
          f"grad max abs err {err:.1e} (max |grad| {top:.1e})")  # fmt: skip
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=2e-5)
    np.testing.assert_allclose(
        probs, ref.forward(spec, params, X), rtol=1e-4, atol=1e-6
    )
    return ref.predict(spec, params, X)


@pytest.mark.parametrize(("text", "n"), CASES)
def test_conv_kernels_on_cpython_match_numpy(text, n):
    # Prepare
    spec, params, X, y = make_case(text, n, seed=5)
    net = kernels.net(text)
    grad = array("f", bytes(4 * net.n_params))
    p, xb = array("f", params.tobytes()), array("f", X.tobytes())
    # Execute
    loss = net.loss_and_grad(p, xb, array("i", y.tobytes()), n, grad)
    out = net.forward(p, xb, n, array("f", bytes(4 * n * spec.n_classes)))
    preds = [net.predict_one(p, xb, s) for s in range(n)]
    # Assert
    probs = np.asarray(out).reshape(n, -1)
    want = check(spec, params, X, y, loss, np.asarray(grad), probs)
    assert preds == want.tolist()


@pytest.mark.firmware
@pytest.mark.parametrize(("text", "n"), CASES)
def test_micropython_conv_kernels_match_numpy(micropython, tmp_path: Path, text, n):
    # Prepare
    spec, params, X, y = make_case(text, n, seed=11)
    files = []
    for name, arr in (("p", params), ("x", X), ("y", y)):
        path = tmp_path / f"{name}.bin"
        path.write_bytes(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
        files.append(str(path))
    out = tmp_path / "out.bin"
    # Execute
    proc = run_micropython(micropython, SCRIPT, text, str(n), *files, str(out))
    # Assert
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = dict(line.split(" ", 1) for line in proc.stdout.strip().splitlines())
    raw = np.frombuffer(out.read_bytes(), dtype="<f4")
    grad, probs = raw[: spec.n_params], raw[spec.n_params :].reshape(n, -1)
    want = check(spec, params, X, y, float(lines["loss"]), grad, probs)
    assert [int(v) for v in lines["preds"].split()] == want.tolist()


def test_a_batch_read_one_window_at_a_time_gives_the_same_gradient():
    # Prepare: the trainer's way, fill() writes each window into a 1-row chunk
    text, n = CASES[0]
    spec, params, X, y = make_case(text, n, seed=3)
    net = kernels.net(text)
    p = array("f", params.tobytes())
    whole = array("f", bytes(4 * net.n_params))
    loss = net.loss_and_grad(
        p, array("f", X.tobytes()), array("i", y.tobytes()), n, whole
    )
    rows = iter(range(n))

    def fill(xb, yb, m):
        r = next(rows)
        xb[:] = array("f", X[r].tobytes())
        yb[0] = int(y[r])

    # Execute
    chunked = array("f", bytes(4 * net.n_params))
    xb, yb = array("f", bytes(4 * spec.n_features)), array("i", [0])
    loss2 = net.loss_and_grad(p, xb, yb, n, chunked, fill)
    # Assert
    assert loss2 == pytest.approx(loss, rel=1e-7)
    assert np.array_equal(np.asarray(chunked), np.asarray(whole))


@pytest.mark.parametrize(
    "text",
    [
        "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10",
        "conv1d:3x64-c8k5s2p2-a2-d32-4",
        "conv1d:2x20-m2-c4k3-m3s1-3",
    ],
)
def test_board_spec_agrees_with_the_host_spec(text):
    spec = ModelSpec.parse(text)
    kind, sizes, act = kernels.parse_spec(text)
    assert (kind, sizes, act) == ("conv1d", [spec.n_features, spec.n_classes], "relu")
    assert kernels.n_params(text) == conv.ConvNet(text).n_params == spec.n_params
    layers = conv.plan(text)[2]
    for ly, op in zip(layers, spec.ops, strict=True):
        assert (ly[1], ly[2]) == (op.w.start, op.b.start)
        assert ly[5] * ly[6] == int(np.prod(op.out_shape))


@pytest.mark.parametrize(
    "text",
    [
        "conv1d",
        "conv1d:40-c4k3-2",
        "conv1d:1x40",
        "conv1d:1x40-c4k3",
        "conv1d:1x40-c4-2",
        "conv1d:1x40-c4k3p3-2",
        "conv1d:1x4-c4k5-2",
        "conv1d:1x40-d8-c4k3-2",
        "conv1d:1x40-5-2",
        "conv1d:1x40-c4k3-1",
        "conv1d:1x40-q3-2",
        "conv1d:0x40-c4k3-2",
        "conv2d:1x8x8-c4k3-2",
    ],
)
def test_board_spec_rejects_bad_text(text):
    with pytest.raises(ValueError):
        kernels.parse_spec(text)
