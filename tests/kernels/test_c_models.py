"""C model kernels against the numpy reference, on random inputs and edge cases."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from hypothesis import given, settings
from hypothesis import strategies as st

SPECS = [
    "linear:8",
    "logistic:32",
    "softmax:64x10",
    "mlp:64-32-10",
    "mlp:64-32-10:tanh",
    "mlp:20-16-8-5",
    "mlp:20-16-8-5:tanh",
    "mlp:3-1-2",
    # widths on both sides of every tile size (8, 16) and the narrow cut-off
    "softmax:19x16",
    "softmax:9x17",
    "mlp:33-17-9-16:tanh",
    "mlp:8-24-8-8",
    "mlp:5-40-15",
]
C = get_backend("c")
NP = get_backend("numpy")


def make_batch(
    spec: ModelSpec, b: int, seed: int, scale: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((b, spec.n_features)) * scale).astype(np.float32)
    if spec.kind == "linear":
        y = rng.standard_normal(b).astype(np.float32)
    else:
        n = 2 if spec.kind == "logistic" else spec.n_classes
        y = rng.integers(0, n, size=b).astype(np.int32)
    return X, y


def assert_same(spec: ModelSpec, p: np.ndarray, X: np.ndarray, y: np.ndarray) -> None:
    lc, gc = C.loss_and_grad(spec, p, X, y)
    ln, gn = NP.loss_and_grad(spec, p, X, y)
    assert lc == pytest.approx(ln, rel=2e-5, abs=1e-6)
    tol = 2e-5 * max(1.0, float(np.abs(gn).max()))
    np.testing.assert_allclose(gc, gn, rtol=1e-4, atol=tol)
    np.testing.assert_allclose(
        C.forward(spec, p, X), NP.forward(spec, p, X), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("text", SPECS)
@pytest.mark.parametrize("batch", [1, 3, 32, 37, 100])
def test_c_matches_numpy_on_random_batches(text: str, batch: int) -> None:
    # Prepare
    spec = ModelSpec.parse(text)
    X, y = make_batch(spec, batch, seed=batch)
    p = spec.init_params(batch) + np.float32(0.01)
    # Execute / Assert
    assert_same(spec, p, X, y)


@pytest.mark.parametrize("text", SPECS)
def test_c_matches_numpy_on_all_zero_input(text: str) -> None:
    spec = ModelSpec.parse(text)
    X, y = make_batch(spec, 5, seed=1)
    assert_same(spec, spec.init_params(1), np.zeros_like(X), y)


@pytest.mark.parametrize("text", ["logistic:4", "softmax:4x6", "mlp:4-8-6"])
def test_huge_logits_stay_finite_and_agree(text: str) -> None:
    # Prepare: inputs that drive logits to about +-1e4, far past exp overflow
    spec = ModelSpec.parse(text)
    X, y = make_batch(spec, 16, seed=2, scale=3e3)
    p = spec.init_params(3)
    # Execute
    lc, gc = C.loss_and_grad(spec, p, X, y)
    ln, gn = NP.loss_and_grad(spec, p, X, y)
    # Assert
    assert np.isfinite(lc) and np.isfinite(gc).all()
    assert lc == pytest.approx(ln, rel=1e-4)
    np.testing.assert_allclose(gc, gn, rtol=1e-3, atol=1e-3 * np.abs(gn).max())


@pytest.mark.parametrize("text", ["softmax:5x4", "mlp:5-6-4", "logistic:5"])
def test_single_class_present(text: str) -> None:
    spec = ModelSpec.parse(text)
    X, _ = make_batch(spec, 12, seed=4)
    y = np.full(12, 1, np.int32)
    assert_same(spec, spec.init_params(4), X, y)


def test_grad_out_is_filled_in_place_and_overwritten() -> None:
    # Prepare: a dirty output buffer must not leak into the gradient
    spec = ModelSpec.parse("mlp:6-5-3")
    X, y = make_batch(spec, 8, seed=5)
    p = spec.init_params(5)
    buf = np.full(spec.n_params, 7.0, np.float32)
    # Execute
    _, g = C.loss_and_grad(spec, p, X, y, grad_out=buf)
    # Assert
    assert g is buf
    np.testing.assert_allclose(buf, NP.loss_and_grad(spec, p, X, y)[1], atol=1e-6)


def test_bad_label_leaves_gradient_untouched() -> None:
    spec = ModelSpec.parse("softmax:3x3")
    X, _ = make_batch(spec, 4, seed=6)
    buf = np.full(spec.n_params, 7.0, np.float32)
    with pytest.raises(ValueError, match="class ids"):
        C.loss_and_grad(
            spec, spec.init_params(0), X, np.array([0, 1, 2, 3], np.int32), grad_out=buf
        )
    assert (buf == 7.0).all()


def test_predict_and_accuracy_agree() -> None:
    spec = ModelSpec.parse("mlp:10-12-4:tanh")
    X, y = make_batch(spec, 50, seed=7)
    p = spec.init_params(7)
    np.testing.assert_array_equal(C.predict(spec, p, X), NP.predict(spec, p, X))
    assert C.accuracy(spec, p, X, y) == NP.accuracy(spec, p, X, y)


def test_training_with_c_kernels_learns() -> None:
    # Prepare: a separable 3-class problem
    spec = ModelSpec.parse("mlp:4-16-3")
    rng = np.random.default_rng(8)
    y = rng.integers(0, 3, 300).astype(np.int32)
    X = (rng.standard_normal((300, 4)) * 0.3).astype(np.float32)
    X[:, 0] += y
    X[:, 1] -= y
    p = spec.init_params(8)
    opt = get_backend("c")
    m, v = np.zeros_like(p), np.zeros_like(p)
    # Execute
    for t in range(1, 201):
        _, g = opt.loss_and_grad(spec, p, X, y)
        opt.adam_step(p, g, m, v, t, 0.02)
    # Assert
    assert opt.accuracy(spec, p, X, y) > 0.9


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(["softmax", "mlp-relu", "mlp-tanh", "logistic", "linear"]),
    f=st.integers(1, 12),
    c=st.integers(2, 7),
    h=st.integers(1, 9),
    b=st.integers(1, 40),
    seed=st.integers(0, 2**16),
)
def test_c_matches_numpy_on_random_shapes(
    kind: str, f: int, c: int, h: int, b: int, seed: int
) -> None:
    if kind.startswith("mlp"):
        spec = ModelSpec("mlp", f, c, (h,), kind.split("-")[1])
    elif kind == "softmax":
        spec = ModelSpec("softmax", f, c)
    else:
        spec = ModelSpec(kind, f)
    X, y = make_batch(spec, b, seed)
    assert_same(spec, spec.init_params(seed), X, y)


def test_fp16_dequantize_matches_numpy_on_every_half() -> None:
    # Prepare: all 65536 bit patterns, NaNs with payloads included
    q = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    # Execute
    got = C.fp16_dequantize(q)
    # Assert: identical float32 bits
    want = q.view(np.float16).astype(np.float32)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_fp16_quantize_matches_numpy_on_random_bit_patterns() -> None:
    # Prepare: two million random float32 bit patterns plus the rounding edges
    rng = np.random.default_rng(9)
    bits = rng.integers(0, 2**32, size=2_000_000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    edges = np.array(
        [2.0**-24, 2.0**-25, 3 * 2.0**-26, 2.0**-14, 65504, 65519.99], np.float32
    )
    x = np.concatenate([x, edges, -edges])
    # Execute
    got = C.fp16_quantize(x)
    # Assert: same bits for every number; NaN stays NaN
    nan = np.isnan(x)
    want = np.clip(x[~nan], -65504, 65504).astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(got[~nan], want)
    assert np.isnan(got[nan].view(np.float16)).all()


def test_concurrent_threads_get_their_own_scratch() -> None:
    # Prepare: the C call releases the GIL, so threads really run together
    from concurrent.futures import ThreadPoolExecutor

    spec = ModelSpec.parse("mlp:64-32-10")
    p = spec.init_params(10)
    batches = [make_batch(spec, 64, seed=s) for s in range(8)]
    want = [C.loss_and_grad(spec, p, X, y)[1] for X, y in batches]

    def work(i: int) -> bool:
        X, y = batches[i % 8]
        return all(
            np.array_equal(C.loss_and_grad(spec, p, X, y)[1], want[i % 8])
            for _ in range(200)
        )

    # Execute
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, range(16)))
    # Assert
    assert all(results)


def test_baseline_variant_matches_numpy_too() -> None:
    # Prepare: a fresh interpreter, since the variant is picked at load time
    import os
    import subprocess
    import sys

    script = (
        "import numpy as np\n"
        "from edgeps._native import ffi, lib\n"
        "from edgeps.kernels import ModelSpec, get_backend\n"
        "assert ffi.string(lib.eps_dispatch_target()) in (b'baseline', b'none')\n"
        "C, N = get_backend('c'), get_backend('numpy')\n"
        "rng = np.random.default_rng(0)\n"
        "for t in ['softmax:19x10', 'mlp:33-17-9-16:tanh', 'mlp:20-40-5']:\n"
        "    s = ModelSpec.parse(t)\n"
        "    X = rng.standard_normal((45, s.n_features)).astype(np.float32)\n"
        "    y = rng.integers(0, s.n_classes, 45).astype(np.int32)\n"
        "    p = s.init_params(1)\n"
        "    gc, gn = C.loss_and_grad(s, p, X, y)[1], N.loss_and_grad(s, p, X, y)[1]\n"
        "    np.testing.assert_allclose(gc, gn, rtol=1e-4, atol=2e-6)\n"
        "print('ok')\n"
    )
    env = dict(os.environ, EDGEPS_NATIVE_BASELINE="1")
    # Execute
    res = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Assert
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "ok"
