"""The numpy conv reference: spec text, layout and gradients by finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, _np_models, get_backend
from edgeps.runtime.model_forms import complete_model

SPECS = [
    "conv1d:2x12-c3k3p1-m2-d5-3",
    "conv1d:3x17-c4k5s2p2-a2-c2k3-m2s1-4",
    "conv2d:1x9x9-c2k3p1-m2-c3k2-a2s1-d4-3",
    "conv2d:2x7x8-c3k3s2p1-m2-2",
]


def _data(spec: ModelSpec, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, spec.n_features)).astype(np.float32)
    y = rng.integers(0, spec.n_classes, size=n).astype(np.int32)
    return X, y


@pytest.mark.parametrize("text", SPECS)
def test_spec_text_round_trips(text: str) -> None:
    spec = ModelSpec.parse(text)
    assert str(spec) == text
    assert ModelSpec.parse(str(spec)) == spec
    assert spec.n_params == spec.ops[-1].b.stop


def test_lenet5_has_the_classic_size() -> None:
    spec = ModelSpec.parse("conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10")
    assert spec.n_params == 61_706
    assert [op.out_shape for op in spec.ops][:4] == [
        (6, 28, 28),
        (6, 14, 14),
        (16, 10, 10),
        (16, 5, 5),
    ]


@pytest.mark.parametrize(
    "text, words",
    [
        ("conv1d:1x4-c2k5-3", "wider than its input"),
        ("conv1d:1x8-c2k3-d4", "class count"),
        ("conv1d:1x8x8-c2k3-3", "CxL"),
        ("conv2d:1x8-c2k3-3", "CxHxW"),
        ("conv1d:1x8-d4-c2k3-3", "after a dense layer"),
        ("conv1d:1x8-q2-3", "bad layer"),
        ("conv1d:1x8-c2k3p3-3", "padding"),
        ("conv1d:1x8-c2k3-1", "2 classes"),
    ],
)
def test_bad_conv_specs_say_why(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ModelSpec.parse(text)


@pytest.mark.parametrize("text", SPECS)
def test_gradient_matches_finite_differences(text: str) -> None:
    # in float64, so the check sees the math and not float32 rounding
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(5, spec.n_features))
    y = rng.integers(0, spec.n_classes, size=5).astype(np.int32)
    p = spec.init_params(3).astype(np.float64)
    p += rng.normal(scale=0.05, size=spec.n_params)
    g = np.zeros_like(p)
    _np_models.loss_and_grad(spec, p, X, y, g)
    num = np.zeros_like(p)
    scratch = np.zeros_like(p)
    for i in range(spec.n_params):
        hi, lo = p.copy(), p.copy()
        hi[i] += 1e-6
        lo[i] -= 1e-6
        up = _np_models.loss_and_grad(spec, hi, X, y, scratch)
        down = _np_models.loss_and_grad(spec, lo, X, y, scratch)
        num[i] = (up - down) / 2e-6
    np.testing.assert_allclose(g, num, atol=1e-6, rtol=1e-5)


def test_float32_kernels_agree_with_the_float64_math() -> None:
    spec = ModelSpec.parse(SPECS[2])
    X, y = _data(spec, 6, 2)
    p = spec.init_params(5)
    loss, g = get_backend("numpy").loss_and_grad(spec, p, X, y)
    g64 = np.zeros(spec.n_params)
    loss64 = _np_models.loss_and_grad(
        spec, p.astype(np.float64), X.astype(np.float64), y, g64
    )
    assert g.dtype == np.float32
    assert loss == pytest.approx(loss64, rel=1e-5)
    np.testing.assert_allclose(g, g64, atol=1e-5, rtol=1e-3)


def test_forward_is_softmax_of_a_hand_computed_conv() -> None:
    # one conv filter over one channel, stride 1, no pad, then the classes
    spec = ModelSpec.parse("conv1d:1x4-c1k2-2")
    p = np.zeros(spec.n_params, np.float32)
    p[spec.ops[0].w] = [1.0, -1.0]  # y[l] = x[l] - x[l+1]
    p[spec.ops[0].b] = [0.5]
    W = np.array([[1, 0], [0, 1], [1, 1]], np.float32)  # (3 positions, 2 classes)
    p[spec.ops[1].w] = W.reshape(-1)
    X = np.array([[3.0, 1.0, 2.0, 0.0]], np.float32)
    h = np.maximum(np.array([3 - 1, 1 - 2, 2 - 0]) + 0.5, 0)  # relu
    z = h @ W
    want = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    got = get_backend("numpy").forward(spec, p, X)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_training_lowers_the_loss() -> None:
    spec = ModelSpec.parse("conv1d:1x16-c4k3p1-m2-d8-2")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 16)).astype(np.float32)
    y = (X[:, :8].sum(axis=1) > X[:, 8:].sum(axis=1)).astype(np.int32)
    k = get_backend("numpy")
    p = spec.init_params(0)
    first = k.loss_and_grad(spec, p, X, y)[0]
    for _ in range(200):
        _, g = k.loss_and_grad(spec, p, X, y)
        k.sgd_step(p, g, 0.1)
    assert k.loss_and_grad(spec, p, X, y)[0] < 0.5 * first


@pytest.mark.parametrize(
    "text, shape, classes, want",
    [
        ("conv1d", (1, 40), 10, "conv1d:1x40-c12k5p2-m2-c12k5p2-m2-c12k5p2-m2-10"),
        ("conv1d:c8k3-m2", (3, 100), 4, "conv1d:3x100-c8k3-m2-4"),
        ("lenet5", (1, 28, 28), 10, "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10"),
        ("lenet5", (1, 32, 32), 10, "conv2d:1x32x32-c6k5-m2-c16k5-m2-d120-d84-10"),
    ],
)
def test_short_conv_forms_are_completed_from_the_data_shape(
    text: str, shape: tuple[int, ...], classes: int, want: str
) -> None:
    n = int(np.prod(shape))
    full = complete_model(text, n, classes, shape)
    assert full == want
    assert ModelSpec.parse(full).n_features == n


def test_a_conv_form_on_rows_says_what_data_it_needs() -> None:
    with pytest.raises(ValueError, match="needs windows"):
        complete_model("conv1d", 40, 10)
    with pytest.raises(ValueError, match="needs images"):
        complete_model("lenet5", 40, 10, (1, 40))


def test_a_full_conv_spec_takes_rows_of_its_window_size() -> None:
    # a full spec names its input shape: rows of C*L floats need no window shape
    text = "conv1d:3x64-c16k5p2-m2-6"
    assert complete_model(text, 192, 6) == text
    with pytest.raises(ValueError, match="needs windows"):
        complete_model("conv1d:c16k5p2-m2", 192, 6)
