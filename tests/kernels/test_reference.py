"""Numpy reference gradients against float64 finite differences; spec text forms."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, _np_models, get_backend

SPECS = [
    "linear:5",
    "logistic:6",
    "softmax:7x4",
    "mlp:5-6-3",
    "mlp:5-6-3:tanh",
    "mlp:4-5-3-3",
    "mlp:4-5-3-3:tanh",
]


def make_batch(spec: ModelSpec, b: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((b, spec.n_features)).astype(np.float32)
    if spec.kind == "linear":
        y = rng.standard_normal(b).astype(np.float32)
    else:
        n = 2 if spec.kind == "logistic" else spec.n_classes
        y = rng.integers(0, n, size=b).astype(np.int32)
    return X, y


@pytest.mark.parametrize("text", SPECS)
def test_reference_gradient_matches_finite_differences_in_float64(text: str) -> None:
    # Prepare: float64 copies run through the same reference code
    spec = ModelSpec.parse(text)
    X, y = make_batch(spec, 7, seed=3)
    p = spec.init_params(11).astype(np.float64) + 0.05
    X64 = X.astype(np.float64)
    g = np.empty_like(p)
    # Execute
    _np_models.loss_and_grad(spec, p, X64, y, g)
    h = 1e-6
    fd = np.empty_like(p)
    for i in range(p.size):
        pp, pm = p.copy(), p.copy()
        pp[i] += h
        pm[i] -= h
        lp = _np_models.loss_and_grad(spec, pp, X64, y, np.empty_like(p))
        lm = _np_models.loss_and_grad(spec, pm, X64, y, np.empty_like(p))
        fd[i] = (lp - lm) / (2 * h)
    # Assert
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("text", SPECS)
def test_reference_loss_matches_forward(text: str) -> None:
    # Prepare
    spec = ModelSpec.parse(text)
    k = get_backend("numpy")
    X, y = make_batch(spec, 9, seed=4)
    p = spec.init_params(2)
    # Execute
    loss, _ = k.loss_and_grad(spec, p, X, y)
    out = k.forward(spec, p, X).astype(np.float64)
    # Assert: the loss is the textbook formula applied to forward()
    if spec.kind == "linear":
        want = np.mean((out - y) ** 2)
    elif spec.kind == "logistic":
        want = -np.mean(y * np.log(out) + (1 - y) * np.log(1 - out))
    else:
        want = -np.mean(np.log(out[np.arange(9), y]))
    assert loss == pytest.approx(want, rel=1e-5)


def test_reference_softmax_survives_huge_logits() -> None:
    # Prepare: weights that produce logits around 1e30
    spec = ModelSpec.parse("softmax:3x4")
    k = get_backend("numpy")
    p = np.zeros(spec.n_params, np.float32)
    p[:12] = np.float32(1e29)
    X = np.array([[10.0, -10.0, 3.0]], np.float32)
    # Execute
    loss, g = k.loss_and_grad(spec, p, X, np.array([2], np.int32))
    # Assert
    assert np.isfinite(loss) and np.isfinite(g).all()


@pytest.mark.parametrize(
    "text",
    ["linear:8", "logistic:32", "softmax:64x10", "mlp:64-32-10", "mlp:64-32-10:tanh"],
)
def test_spec_text_round_trips(text: str) -> None:
    assert str(ModelSpec.parse(text)) == text


def test_spec_layout_and_param_count() -> None:
    # Prepare
    spec = ModelSpec.parse("mlp:4-3-2")
    # Execute
    slices = spec.layer_slices()
    # Assert: W1 (4x3) b1 (3) W2 (3x2) b2 (2), packed in that order
    assert spec.n_params == 4 * 3 + 3 + 3 * 2 + 2
    assert [(s[0].start, s[1], s[2].start) for s in slices] == [
        (0, (4, 3), 12),
        (15, (3, 2), 21),
    ]
    assert spec.init_params(5).dtype == np.float32
    np.testing.assert_array_equal(spec.init_params(5), spec.init_params(5))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "linear",
        "linear:0",
        "softmax:8",
        "softmax:8x1",
        "mlp:8-2",
        "mlp:8-4-4-4-2",
        "mlp:8-4-2:sigmoid",
        "cnn:3",
        "logistic:x",
    ],
)
def test_spec_parse_rejects_bad_text(text: str) -> None:
    with pytest.raises(ValueError):
        ModelSpec.parse(text)


def test_spec_rejects_bad_fields() -> None:
    with pytest.raises(ValueError):
        ModelSpec("logistic", 4, n_classes=3)
    with pytest.raises(ValueError):
        ModelSpec("softmax", 4, 3, activation="tanh")
    with pytest.raises(TypeError):
        ModelSpec("linear", 4.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ModelSpec("mlp", 4, 3, hidden=())
