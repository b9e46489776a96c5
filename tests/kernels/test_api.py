"""The kernel API on every backend: optimizers, helpers, quantizers, bad input."""

from __future__ import annotations

import edgeps.kernels as kernels
import numpy as np
import pytest
from edgeps.kernels import Kernels, ModelSpec, get_backend, make_optimizer
from edgeps.kernels.optim import make_optimizer as make_optimizer_on
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

BACKENDS = ["numpy", "c"]


@pytest.fixture(params=BACKENDS)
def k(request: pytest.FixtureRequest) -> Kernels:
    return get_backend(request.param)


def rand(n: int, seed: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(n) * scale).astype(np.float32)


# ---------- optimizers ----------


def test_sgd_step_matches_formula(k: Kernels) -> None:
    p, g = rand(100, 1), rand(100, 2)
    want = p - np.float32(0.1) * g
    k.sgd_step(p, g, 0.1)
    np.testing.assert_allclose(p, want, rtol=1e-6, atol=1e-7)


def test_momentum_step_matches_formula_over_steps(k: Kernels) -> None:
    # Prepare
    p, v = rand(50, 1), np.zeros(50, np.float32)
    p64, v64 = p.astype(np.float64), np.zeros(50)
    # Execute
    for i in range(5):
        g = rand(50, 10 + i)
        k.momentum_step(p, g, v, 0.05, 0.9)
        v64 = 0.9 * v64 + g
        p64 -= 0.05 * v64
    # Assert
    np.testing.assert_allclose(p, p64, rtol=1e-5, atol=1e-6)


def test_adam_step_matches_textbook(k: Kernels) -> None:
    # Prepare
    p = rand(64, 1)
    m, v = np.zeros(64, np.float32), np.zeros(64, np.float32)
    p64, m64, v64 = p.astype(np.float64), np.zeros(64), np.zeros(64)
    # Execute
    for t in range(1, 8):
        g = rand(64, 20 + t)
        k.adam_step(p, g, m, v, t, 0.01)
        m64 = 0.9 * m64 + 0.1 * g
        v64 = 0.999 * v64 + 0.001 * g.astype(np.float64) ** 2
        p64 -= 0.01 * (m64 / (1 - 0.9**t)) / (np.sqrt(v64 / (1 - 0.999**t)) + 1e-8)
    # Assert
    np.testing.assert_allclose(p, p64, rtol=1e-5, atol=1e-6)


def test_optimizer_state_dict_resumes_identically(k: Kernels) -> None:
    # Prepare: two optimizers, the second restored from the first's checkpoint
    a = make_optimizer_on(k, "adam", 32, beta1=0.8)
    pa = rand(32, 1)
    for i in range(3):
        a.step(pa, rand(32, i), 0.01)
    b = make_optimizer_on(k, "adam", 32, beta1=0.8)
    b.load_state_dict(a.state_dict())
    pb = pa.copy()
    # Execute
    g = rand(32, 99)
    a.step(pa, g, 0.01)
    b.step(pb, g, 0.01)
    # Assert
    np.testing.assert_array_equal(pa, pb)
    assert b.t == 4


def test_optimizer_rejects_bad_names_and_states() -> None:
    with pytest.raises(ValueError, match="unknown optimizer"):
        make_optimizer("rmsprop", 4)
    with pytest.raises(TypeError):
        make_optimizer("sgd", 4, momentum=0.9)
    mom = make_optimizer("momentum", 4)
    with pytest.raises(ValueError):
        mom.load_state_dict(make_optimizer("adam", 4).state_dict())
    with pytest.raises(ValueError):
        mom.load_state_dict(make_optimizer("momentum", 5).state_dict())


# ---------- norms ----------


def test_l2_norm_and_clip(k: Kernels) -> None:
    # Prepare
    x = rand(1000, 3)
    n = float(np.linalg.norm(x.astype(np.float64)))
    # Execute
    got = k.l2_norm(x)
    scale = k.clip_norm_(x, n / 2)
    # Assert
    assert got == pytest.approx(n, rel=1e-5)
    assert scale == pytest.approx(0.5, rel=1e-5)
    assert float(np.linalg.norm(x)) == pytest.approx(n / 2, rel=1e-5)
    assert k.clip_norm_(x, n) == 1.0


def test_l2_norm_does_not_overflow(k: Kernels) -> None:
    x = np.full(16, 1e30, np.float32)
    assert k.l2_norm(x) == pytest.approx(4e30, rel=1e-5)


def test_all_finite(k: Kernels) -> None:
    x = rand(37, 1)
    assert k.all_finite(x)
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[36] = bad
        assert not k.all_finite(y)


# ---------- quantizers ----------


def test_fp16_round_trip_is_within_half_ulp(k: Kernels) -> None:
    # Prepare
    x = rand(4096, 5, scale=100.0)
    # Execute
    back = k.fp16_dequantize(k.fp16_quantize(x))
    # Assert: relative error of half precision rounding is at most 2**-11
    assert back.dtype == np.float32
    np.testing.assert_allclose(back, x, rtol=2.0**-11, atol=2.0**-25)


def test_fp16_matches_numpy_half_and_saturates(k: Kernels) -> None:
    # Prepare: normals, subnormals, ties, zeros, overflow
    x = np.array(
        [
            0.0,
            -0.0,
            1.0,
            1.0 + 2**-11,
            1.0 + 3 * 2**-11,
            6e-8,
            3e-8,
            1e-9,
            -5e-6,
            65504.0,
            65519.0,
            70000.0,
            -1e9,
            np.inf,
            0.1,
            3.14159,
        ],
        np.float32,
    )
    # Execute
    q = k.fp16_quantize(x)
    # Assert
    want = np.clip(x, -65504, 65504).astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(q, want)
    assert np.isnan(k.fp16_dequantize(k.fp16_quantize(np.array([np.nan], np.float32))))


def test_int8_round_trip_error_is_half_a_quantum(k: Kernels) -> None:
    # Prepare
    x = rand(1000, 6, scale=3.0)
    # Execute
    q, scales = k.int8_quantize(x, 64)
    back = k.int8_dequantize(q, scales, 64)
    # Assert
    assert q.dtype == np.int8 and scales.shape == (16,)
    quantum = np.repeat(scales, 64)[:1000]
    assert np.all(np.abs(back - x) <= 0.5 * quantum * (1 + 1e-5) + 1e-12)
    assert np.abs(q).max() == 127


def test_int8_zero_block_gives_zero_scale(k: Kernels) -> None:
    x = np.zeros(10, np.float32)
    x[8] = 2.0
    q, s = k.int8_quantize(x, 4)
    np.testing.assert_array_equal(s[:2], [0.0, 0.0])
    np.testing.assert_array_equal(k.int8_dequantize(q, s, 4), x)


@pytest.mark.parametrize("codec", ["fp16", "int8"])
def test_error_feedback_keeps_the_running_sum_within_one_quantum(
    k: Kernels, codec: str
) -> None:
    # Prepare: small drifting updates next to a large one in the same int8 block;
    # alone they round to zero, so without feedback nothing of them is sent
    n, steps = 256, 500
    residual = np.zeros(n, np.float32)
    sent = np.zeros(n, np.float64)
    total = np.zeros(n, np.float64)
    rng = np.random.default_rng(7)
    bound = np.zeros(n)
    # Execute
    for _ in range(steps):
        x = (2e-3 + rng.standard_normal(n) * 1e-3).astype(np.float32)
        x[0] = 1.0
        total += x
        if codec == "fp16":
            q = k.fp16_quantize(x, residual)
            back = k.fp16_dequantize(q)
            bound = 0.5 * np.spacing(np.abs(q.view(np.float16))).astype(np.float64)
        else:
            q8, s = k.int8_quantize(x, 32, residual)
            back = k.int8_dequantize(q8, s, 32)
            bound = 0.5 * np.repeat(s, 32)[:n].astype(np.float64)
        sent += back
    # Assert: what was sent tracks what was produced within half a quantum
    gap = np.abs(total - sent)
    assert np.all(gap <= bound * 1.001 + 1e-5)
    assert total[1:32].min() > 0.5  # the drift is large enough to matter
    np.testing.assert_allclose(total - sent, residual, atol=1e-5)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    x=hnp.arrays(
        np.float32,
        st.integers(1, 300),
        elements=st.floats(-1e6, 1e6, width=32, allow_nan=False),
    ),
    block=st.integers(1, 70),
)
def test_int8_backends_agree_exactly(x: np.ndarray, block: int) -> None:
    # Prepare: the same residual for each backend
    r0 = (np.arange(x.shape[0], dtype=np.float32) % 7 - 3) * np.float32(0.01)
    # Execute
    out = {}
    for name in BACKENDS:
        r = r0.copy()
        q, s = get_backend(name).int8_quantize(x, block, r)
        out[name] = (q, s, r)
    # Assert: codes, scales and the new residual agree bit for bit
    for a, b in zip(out["c"], out["numpy"], strict=True):
        np.testing.assert_array_equal(a, b)


# ---------- bad input ----------


def test_bad_arrays_raise_clear_errors(k: Kernels) -> None:
    spec = ModelSpec.parse("softmax:4x3")
    p = spec.init_params(0)
    X = np.zeros((2, 4), np.float32)
    y = np.array([0, 2], np.int32)
    with pytest.raises(TypeError, match="dtype"):
        k.loss_and_grad(spec, p, X.astype(np.float64), y)
    with pytest.raises(TypeError, match="dtype"):
        k.loss_and_grad(spec, p, X, y.astype(np.int64))
    with pytest.raises(ValueError, match="features"):
        k.loss_and_grad(spec, p, np.zeros((2, 5), np.float32), y)
    with pytest.raises(ValueError, match="length"):
        k.loss_and_grad(spec, p[:-1], X, y)
    with pytest.raises(ValueError, match="contiguous"):
        k.loss_and_grad(spec, p, np.zeros((4, 4), np.float32)[::2], y)
    with pytest.raises(ValueError, match="class ids"):
        k.loss_and_grad(spec, p, X, np.array([0, 3], np.int32))
    with pytest.raises(ValueError, match="class ids"):
        k.loss_and_grad(spec, p, X, np.array([-1, 0], np.int32))
    with pytest.raises(ValueError, match="rows"):
        k.loss_and_grad(spec, p, X, np.array([0], np.int32))
    with pytest.raises(ValueError, match="empty"):
        k.forward(spec, p, np.zeros((0, 4), np.float32))
    with pytest.raises(TypeError):
        k.forward("softmax:4x3", p, X)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grad_out"):
        k.loss_and_grad(spec, p, X, y, grad_out=np.zeros(3, np.float32))


def test_bad_optimizer_and_helper_args(k: Kernels) -> None:
    p, g = rand(8, 1), rand(8, 2)
    with pytest.raises(ValueError, match="length"):
        k.sgd_step(p, g[:4], 0.1)
    with pytest.raises(ValueError, match="finite"):
        k.sgd_step(p, g, float("nan"))
    with pytest.raises(ValueError, match="momentum"):
        k.momentum_step(p, g, np.zeros(8, np.float32), 0.1, 1.5)
    with pytest.raises(ValueError, match="t counts"):
        k.adam_step(p, g, np.zeros(8, np.float32), np.zeros(8, np.float32), 0, 0.1)
    ro = p.copy()
    ro.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        k.sgd_step(ro, g, 0.1)
    with pytest.raises(ValueError, match="max_norm"):
        k.clip_norm_(p, 0.0)
    with pytest.raises(ValueError, match="block"):
        k.int8_quantize(p, 0)
    with pytest.raises(ValueError, match="NaN"):
        k.int8_quantize(np.array([1.0, np.nan], np.float32), 2)
    with pytest.raises(ValueError, match="scales"):
        k.int8_dequantize(np.zeros(8, np.int8), np.zeros(1, np.float32), 4)
    with pytest.raises(TypeError):
        k.fp16_dequantize(np.zeros(4, np.int16))
    with pytest.raises(TypeError):
        k.l2_norm([1.0, 2.0])  # type: ignore[arg-type]


def test_module_level_api_uses_the_active_backend() -> None:
    assert kernels.backend_name() in ("c", "numpy")
    assert kernels.backend_reason()
    spec = ModelSpec.parse("logistic:3")
    X = np.eye(3, dtype=np.float32)
    pred = kernels.predict(spec, spec.init_params(0), X)
    assert pred.dtype == np.int32 and pred.shape == (3,)
