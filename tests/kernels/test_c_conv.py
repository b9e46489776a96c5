"""C conv-net kernels against the numpy reference, finite differences and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from hypothesis import given, settings
from hypothesis import strategies as st

C = get_backend("c")
NP = get_backend("numpy")
if C.name != "c":  # pragma: no cover - only without a compiler
    pytest.skip("the C kernels are not built", allow_module_level=True)

from edgeps._native import ffi, lib  # noqa: E402
from edgeps.kernels.c_backend import net_struct  # noqa: E402

SPECS = [
    # the defaults and LeNet-5
    "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10",
    "conv1d:6x100-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-6",
    "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10",
    # strides, padding, odd sizes, overlapping and average pools
    "conv1d:3x17-c4k5s2p2-a2-c2k3-m2s1-4",
    "conv1d:2x31-c5k7s3p3-m3s2-a3s1-d17-3",
    "conv1d:1x9-c1k1-2",
    "conv1d:4x13-c9k4p3-a5s3-c3k2s2p1-d3-d16-2",
    "conv2d:1x9x9-c2k3p1-m2-c3k2-a2s1-d4-3",
    "conv2d:2x7x8-c3k3s2p1-m2-2",
    "conv2d:3x11x13-c5k4s3p2-m3s1-a2-d20-d17-5",
    "conv2d:2x6x5-c4k3p2-m2s1-c17k2s2-a2s1-7",
    "conv2d:1x12x12-c8k3p1-m2-c16k3p1-m2-d64-10",
    # a pool first (no input gradient to pass back), a 1-wide output
    "conv1d:3x7-a1s2-c13k4-d1-4",
    "conv2d:2x9x9-m3s2-c3k2-2",
]
BATCHES = [1, 5, 33, 70]  # across the 32-row chunk


def make_batch(spec: ModelSpec, b: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((b, spec.n_features)).astype(np.float32)
    y = rng.integers(0, spec.n_classes, size=b).astype(np.int32)
    return X, y


def params(spec: ModelSpec, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 100)
    p = spec.init_params(seed)
    # non-zero biases, so a bias that is dropped or misplaced shows
    return p + rng.normal(scale=0.05, size=p.shape).astype(np.float32)


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("text", SPECS)
def test_c_matches_the_numpy_reference(text: str, batch: int) -> None:
    spec = ModelSpec.parse(text)
    X, y = make_batch(spec, batch, seed=batch)
    p = params(spec, 1)
    lc, gc = C.loss_and_grad(spec, p, X, y)
    ln, gn = NP.loss_and_grad(spec, p, X, y)
    assert lc == pytest.approx(ln, rel=1e-5, abs=1e-6)
    tol = 1e-5 * max(1.0, float(np.abs(gn).max()))
    np.testing.assert_allclose(gc, gn, rtol=1e-4, atol=tol)
    fc, fn = C.forward(spec, p, X), NP.forward(spec, p, X)
    assert fc.shape == (batch, spec.n_classes)
    np.testing.assert_allclose(fc, fn, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(C.predict(spec, p, X), NP.predict(spec, p, X))


@pytest.mark.parametrize("text", SPECS[3:])
def test_c_gradient_matches_finite_differences(text: str) -> None:
    # directional derivatives of the C loss itself, in float32: h is large
    # enough that the loss's rounding (~1e-7) stays far below the signal
    spec = ModelSpec.parse(text)
    X, y = make_batch(spec, 6, seed=3)
    p = params(spec, 2)
    _, g = C.loss_and_grad(spec, p, X, y)
    rng = np.random.default_rng(7)
    h = 1e-3
    for _ in range(4):
        d = rng.standard_normal(spec.n_params).astype(np.float32)
        d /= np.linalg.norm(d)
        up = C.loss_and_grad(spec, p + h * d, X, y)[0]
        down = C.loss_and_grad(spec, p - h * d, X, y)[0]
        num = (up - down) / (2 * h)
        assert num == pytest.approx(float(g @ d), rel=1e-2, abs=1e-3)


def test_a_max_pool_tie_sends_the_gradient_to_the_first_maximum() -> None:
    spec = ModelSpec.parse("conv1d:1x4-c1k1-m2-2")
    p = np.zeros(spec.n_params, np.float32)
    p[spec.ops[0].w] = 1.0  # identity conv (then ReLU)
    p[spec.ops[2].w] = [1.0, -1.0, 2.0, 0.5]  # (2 positions, 2 classes)
    X = np.array([[2.0, 2.0, 1.0, 3.0]], np.float32)  # a tie in the first window
    y = np.array([0], np.int32)
    lc, gc = C.loss_and_grad(spec, p, X, y)
    ln, gn = NP.loss_and_grad(spec, p, X, y)
    np.testing.assert_allclose(gc, gn, rtol=1e-5, atol=1e-7)
    assert lc == pytest.approx(ln, rel=1e-6)


def test_training_with_the_c_kernels_lowers_the_loss() -> None:
    spec = ModelSpec.parse("conv1d:1x16-c4k3p1-m2-d8-2")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 16)).astype(np.float32)
    y = (X[:, :8].sum(axis=1) > X[:, 8:].sum(axis=1)).astype(np.int32)
    p = spec.init_params(0)
    first = C.loss_and_grad(spec, p, X, y)[0]
    g = np.empty_like(p)
    for _ in range(200):
        C.loss_and_grad(spec, p, X, y, g)
        C.sgd_step(p, g, 0.1)
    assert C.loss_and_grad(spec, p, X, y)[0] < 0.5 * first


def test_a_bad_label_is_refused_before_anything_is_written() -> None:
    spec = ModelSpec.parse(SPECS[3])
    X, y = make_batch(spec, 5, seed=0)
    p = params(spec, 0)
    y[3] = spec.n_classes
    with pytest.raises(ValueError, match="class ids"):
        C.loss_and_grad(spec, p, X, y)
    # the raw call: EpsErrValue and the gradient buffer untouched
    net = net_struct(spec)
    n_s = lib.eps_net_scratch_length(net, 5)
    g = np.full(spec.n_params, 7.0, np.float32)
    scratch = ffi.new("float[]", n_s)
    loss = ffi.new("float *")
    code = lib.eps_net_loss_grad(
        net,
        ffi.from_buffer("float[]", p),
        ffi.from_buffer("float[]", X),
        5,
        ffi.from_buffer("int32_t[]", y),
        ffi.from_buffer("float[]", g),
        scratch,
        loss,
    )
    assert code == lib.EpsErrValue
    assert (g == 7.0).all()


def _net(text: str) -> tuple[ModelSpec, object]:
    spec = ModelSpec.parse(text)
    return spec, net_struct(spec)


def test_sizes_and_checks_of_a_valid_net() -> None:
    spec, net = _net(SPECS[2])
    assert lib.eps_net_n_params(net) == spec.n_params == 61_706
    assert lib.eps_net_n_classes(net) == 10
    need = lib.eps_net_scratch_length(net, 8)
    assert need > 0
    # the scratch stops growing at the chunk size
    big = lib.eps_net_scratch_length(net, 1 << 20)
    assert lib.eps_net_scratch_length(net, 32) == big >= need
    assert lib.eps_net_check(net, spec.n_params, need, 8) == lib.EpsOk
    assert lib.eps_net_check(net, spec.n_params - 1, need, 8) == lib.EpsErrLength
    assert lib.eps_net_check(net, spec.n_params, need - 1, 8) == lib.EpsErrLength
    assert lib.eps_net_check(net, spec.n_params, need, 0) == lib.EpsErrValue
    assert lib.eps_net_scratch_length(net, 0) == -1


def _break(net: object, what: str) -> None:
    n = net.n_layers  # type: ignore[attr-defined]
    ly = net.layers  # type: ignore[attr-defined]
    if what == "dims":
        net.dims = 3  # type: ignore[attr-defined]
    elif what == "no layers":
        net.n_layers = 0  # type: ignore[attr-defined]
    elif what == "too many layers":
        net.n_layers = 33  # type: ignore[attr-defined]
    elif what == "zero input":
        net.in_shape[1] = 0  # type: ignore[attr-defined]
    elif what == "op":
        ly[0].op = 9
    elif what == "pad >= k":
        ly[0].pad = ly[0].k
    elif what == "zero stride":
        ly[0].stride = 0
    elif what == "kernel wider than input":
        ly[0].k = 200
    elif what == "pool with padding":
        ly[1].pad = 1
    elif what == "conv without relu":
        ly[0].relu = 0
    elif what == "conv after dense":
        ly[0].op, ly[0].k, ly[0].stride, ly[0].pad = lib.EpsOpDense, 1, 1, 0
    elif what == "last has relu":
        ly[n - 1].relu = 1
    elif what == "last is a pool":
        ly[n - 1].op, ly[n - 1].n_out, ly[n - 1].relu = lib.EpsOpMaxPool, 0, 0
    elif what == "one class":
        ly[n - 1].n_out = 1
    elif what == "dense too wide":
        ly[n - 2].n_out = (1 << 20) + 1
    else:  # pragma: no cover
        raise AssertionError(what)


BROKEN = [
    "dims",
    "no layers",
    "too many layers",
    "zero input",
    "op",
    "pad >= k",
    "zero stride",
    "kernel wider than input",
    "pool with padding",
    "conv without relu",
    "conv after dense",
    "last has relu",
    "last is a pool",
    "one class",
    "dense too wide",
]


@pytest.mark.parametrize("what", BROKEN)
def test_an_invalid_net_gets_err_value(what: str) -> None:
    spec, net = _net("conv1d:2x40-c4k5p2-m2-c3k3-d8-3")
    _break(net, what)
    assert lib.eps_net_n_params(net) == -1
    assert lib.eps_net_n_classes(net) == -1
    assert lib.eps_net_scratch_length(net, 4) == -1
    assert lib.eps_net_check(net, spec.n_params, 1 << 20, 4) == lib.EpsErrValue


def test_a_conv_after_a_dense_layer_is_invalid() -> None:
    spec, net = _net("conv1d:2x8-c2k1-d4-3")
    first, second = net.layers[0], net.layers[1]  # type: ignore[attr-defined]
    first.op, first.n_out, first.k = lib.EpsOpDense, 4, 1
    second.op, second.n_out, second.k = lib.EpsOpConv, 2, 1
    assert lib.eps_net_n_params(net) == -1
    assert lib.eps_net_check(net, spec.n_params, 1 << 20, 1) == lib.EpsErrValue
    assert lib.eps_net_check(ffi.NULL, 0, 0, 1) == lib.EpsErrValue


def _layer_reference(
    spec: ModelSpec, i: int, p: np.ndarray, x: np.ndarray, y: np.ndarray, dy: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """numpy's gradient of layer i: (its params' slice of grad, dx)."""
    from edgeps.kernels import _np_conv

    op = spec.ops[i]
    g = np.zeros(spec.n_params, np.float32)
    if op.layer.relu and op.op in ("conv", "dense"):
        dy = dy * (y > 0)
    if op.op == "conv":
        W = p[op.w].reshape(op.w_shape)
        gW = g[op.w].reshape(op.w_shape)
        dx = _np_conv.conv_backward(op, W, x, dy, gW, g[op.b], True)
    elif op.op == "dense":
        W = p[op.w].reshape(op.w_shape)
        xf = x.reshape(x.shape[0], -1)
        g[op.w] = (xf.T @ dy).reshape(-1)
        g[op.b] = dy.sum(axis=0)
        dx = (dy @ W.T).reshape(x.shape)
    else:
        dx = _np_conv.pool_backward(op, x, y, dy)
    assert dx is not None
    return g, dx


@pytest.mark.parametrize("text", [SPECS[1], SPECS[2], SPECS[4], SPECS[9]])
def test_each_layer_alone_matches_the_numpy_reference(text: str) -> None:
    from edgeps.kernels import _np_conv

    spec = ModelSpec.parse(text)
    net = net_struct(spec)
    B = 35
    X, _ = make_batch(spec, B, seed=1)
    p = params(spec, 4)
    acts = _np_conv.hidden_forward(spec.ops, p, X)
    scratch = ffi.new("float[]", lib.eps_net_scratch_length(net, B))
    f32 = lambda a: ffi.from_buffer("float[]", a)  # noqa: E731
    rng = np.random.default_rng(2)
    for i in range(len(spec.ops)):
        x = np.ascontiguousarray(acts[i], np.float32)
        want = np.ascontiguousarray(acts[i + 1], np.float32)
        out = np.empty(want.shape, np.float32)
        lib.eps_net_layer_forward(net, i, f32(p), f32(x), B, f32(out), scratch)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
        dy = rng.standard_normal(want.shape).astype(np.float32)
        g_ref, dx_ref = _layer_reference(spec, i, p, x, want, dy)
        g = np.zeros(spec.n_params, np.float32)
        dx = np.empty(x.shape, np.float32)
        lib.eps_net_layer_backward(
            net, i, f32(p), f32(x), f32(want), f32(dy.copy()), B, f32(g), f32(dx),
            scratch,
        )  # fmt: skip
        tol = 1e-5 * max(1.0, float(np.abs(g_ref).max()))
        np.testing.assert_allclose(g, g_ref, rtol=1e-4, atol=tol)
        np.testing.assert_allclose(dx, dx_ref, rtol=1e-4, atol=1e-5)


@st.composite
def conv_specs(draw: st.DrawFn) -> str:
    """Random layer lists that fit their input: any stride, padding, pool overlap."""
    dims = draw(st.sampled_from([1, 2]))
    c = draw(st.integers(1, 3))
    sizes = [draw(st.integers(3, 13 if dims == 2 else 40)) for _ in range(dims)]
    tokens, n = [], min(sizes)
    for _ in range(draw(st.integers(1, 3))):
        k = draw(st.integers(1, min(n, 5)))
        s = draw(st.integers(1, 3))
        if draw(st.booleans()):
            p = draw(st.integers(0, k - 1))
            tokens.append(f"c{draw(st.integers(1, 17))}k{k}s{s}p{p}")
            n = (n + 2 * p - k) // s + 1
        else:
            tokens.append(f"{draw(st.sampled_from('ma'))}{k}s{s}")
            n = (n - k) // s + 1
    if draw(st.booleans()):
        tokens.append(f"d{draw(st.integers(1, 20))}")
    tokens.append(str(draw(st.integers(2, 4))))
    shape = "x".join(map(str, [c, *sizes]))
    return f"conv{dims}d:{shape}-" + "-".join(tokens)


@settings(max_examples=60, deadline=None)
@given(text=conv_specs(), batch=st.integers(1, 40), seed=st.integers(0, 99))
def test_random_nets_match_the_numpy_reference(
    text: str, batch: int, seed: int
) -> None:
    spec = ModelSpec.parse(text)
    X, y = make_batch(spec, batch, seed)
    p = params(spec, seed)
    lc, gc = C.loss_and_grad(spec, p, X, y)
    ln, gn = NP.loss_and_grad(spec, p, X, y)
    assert lc == pytest.approx(ln, rel=1e-5, abs=1e-6)
    tol = 1e-5 * max(1.0, float(np.abs(gn).max()))
    np.testing.assert_allclose(gc, gn, rtol=1e-4, atol=tol)
    np.testing.assert_allclose(
        C.forward(spec, p, X), NP.forward(spec, p, X), rtol=1e-4, atol=1e-6
    )
