"""Uplink codecs (edgeps.codecs) against numpy references, on both kernel backends."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from edgeps import kernels
from edgeps.codecs import (
    F16,
    F32,
    I8,
    TOPK,
    CodecError,
    Compress,
    GradEncoder,
    decode_update,
    parse_compress,
)
from edgeps_worker import wire_host as wire

BACKENDS = ["numpy", "c"]


def backend(name: str) -> kernels.Kernels:
    return kernels.get_backend(name)


def ref_int8(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The spec's I8 in plain numpy: scale = max|v|/127, q = round-half-away."""
    n = v.shape[0]
    scales, qs = [], []
    for b in range(0, n, 128):
        blk = v[b : b + 128].astype(np.float64)
        amax = float(np.max(np.abs(blk)))
        if amax < 1e-30:
            scales.append(0.0)
            qs.append(np.zeros(blk.shape[0], np.int8))
            continue
        scale = np.float32(amax / 127.0)
        r = blk * (127.0 / amax)
        q = np.clip(np.sign(r) * np.floor(np.abs(r) + 0.5), -127, 127)
        scales.append(float(scale))
        qs.append(q.astype(np.int8))
    return np.concatenate(qs), np.array(scales, np.float32)


def ref_i8_bytes(q: np.ndarray, scales: np.ndarray) -> bytes:
    out = b""
    for i, s in enumerate(scales):
        out += struct.pack("<f", float(s)) + q[i * 128 : (i + 1) * 128].tobytes()
    return out


def test_parse_compress_spellings() -> None:
    # Execute / Assert
    assert parse_compress("f32") == Compress(F32)
    assert parse_compress("INT8") == Compress(I8)
    assert parse_compress("topk:0.01") == Compress(TOPK, 0.01)
    assert str(parse_compress("topk:0.01")) == "topk:0.01"
    assert Compress(TOPK, 0.01).arg(650) == 6 and Compress(TOPK, 1e-6).arg(650) == 1
    assert Compress(I8).update_bytes(650) == 4 * 6 + 650


@pytest.mark.parametrize("bad", ["f64", "topk", "topk:0", "topk:1.5", "int8:2", ""])
def test_parse_compress_refuses(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_compress(bad)


@pytest.mark.parametrize("name", BACKENDS)
def test_f16_matches_numpy_halves_and_saturates(name: str) -> None:
    # Prepare: values around the rounding ties and beyond the half range
    rng = np.random.default_rng(1)
    g = np.concatenate(
        [rng.normal(0, 3, 500), [1e6, -1e6, 65504.0, 2049.0, 2051.0, 1e-8]]
    ).astype(np.float32)
    enc = GradEncoder(g.shape[0], backend(name))

    # Execute
    body = bytes(enc.encode(g, F16))
    back = decode_update(F16, body, g.shape[0])

    # Assert: round to nearest even as numpy, saturating at +-65504
    want = np.clip(g, -65504, 65504).astype(np.float16)
    assert body == want.astype("<f2").tobytes()
    np.testing.assert_array_equal(back, want.astype(np.float32))
    # error feedback: the residual is what was not sent
    np.testing.assert_allclose(enc.residual, g - back, rtol=0, atol=0)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("n", [1, 127, 128, 129, 650])
def test_int8_matches_the_numpy_reference(name: str, n: int) -> None:
    # Prepare
    rng = np.random.default_rng(n)
    g = rng.normal(0, 1, n).astype(np.float32)
    if n >= 128:
        g[:128] = 0.0  # a block of zeros: scale 0, every q 0
    enc = GradEncoder(n, backend(name))

    # Execute
    body = bytes(enc.encode(g, I8))
    back = decode_update(I8, body, n)

    # Assert: layout and values as the reference; the error is at most half a step
    q, scales = ref_int8(g)
    assert len(body) == wire.encoded_len(I8, n)
    assert body == ref_i8_bytes(q, scales)
    step = np.repeat(scales, 128)[:n]
    np.testing.assert_allclose(back, q * step, rtol=1e-6, atol=0)
    assert np.all(np.abs(back - g) <= step / 2 * (1 + 1e-5) + 1e-12)


@pytest.mark.parametrize("name", BACKENDS)
def test_topk_sends_the_largest_entries_in_index_order(name: str) -> None:
    # Prepare
    rng = np.random.default_rng(3)
    g = rng.normal(0, 1, 650).astype(np.float32)
    enc = GradEncoder(650, backend(name))

    # Execute
    body = bytes(enc.encode(g, TOPK, 7))
    rec = np.frombuffer(body, [("i", "<u4"), ("v", "<f4")])
    back = decode_update(TOPK, body, 650)

    # Assert
    want = np.sort(np.argsort(-np.abs(g))[:7])
    assert len(body) == 56
    np.testing.assert_array_equal(rec["i"], want)
    np.testing.assert_array_equal(rec["v"], g[want])
    assert np.count_nonzero(back) == 7 and np.all(back[want] == g[want])
    np.testing.assert_array_equal(enc.residual, g - back)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize(("code", "arg"), [(F16, 0), (I8, 0), (TOPK, 6)])
def test_error_feedback_sends_everything_and_keeps_the_residual_bounded(
    name: str, code: int, arg: int
) -> None:
    # Prepare: 400 steps of gradients that drift, like a training run's
    n = 650
    rng = np.random.default_rng(7)
    enc = GradEncoder(n, backend(name))
    total_g = np.zeros(n, np.float64)
    total_sent = np.zeros(n, np.float64)
    worst = 0.0
    gmax = 0.0

    # Execute
    for t in range(400):
        g = (rng.normal(0, 1, n) * (1 + 0.5 * np.sin(t / 20))).astype(np.float32)
        sent = decode_update(code, bytes(enc.encode(g, code, arg)), n)
        total_g += g
        total_sent += sent
        worst = max(worst, float(np.max(np.abs(enc.residual))))
        gmax = max(gmax, float(np.max(np.abs(g))))

    # Assert: what was sent plus what is owed is exactly what was computed
    np.testing.assert_allclose(total_sent + enc.residual, total_g, atol=2e-3)
    if code == TOPK:
        # each entry waits at most ~n/k steps: the residual stays finite and small
        assert worst < 4 * np.sqrt(n / arg) * gmax
    else:
        # quantizers: at most half a quantization step of max|v| per entry
        assert worst <= gmax * (1.0 / 127 if code == I8 else 1e-3)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("code", [F16, I8, TOPK])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_are_refused_before_encoding(
    name: str, code: int, bad: float
) -> None:
    # Prepare: one step leaves a residual
    rng = np.random.default_rng(0)
    enc = GradEncoder(300, backend(name))
    enc.encode(rng.normal(0, 1, 300).astype(np.float32), code, 5)
    before = enc.residual.copy()
    g = rng.normal(0, 1, 300).astype(np.float32)
    g[123] = bad

    # Execute / Assert: refused, and the residual did not move
    with pytest.raises(ValueError, match="NaN or Inf"):
        enc.encode(g, code, 5)
    np.testing.assert_array_equal(enc.residual, before)


def _topk(pairs: list[tuple[int, float]]) -> bytes:
    return b"".join(struct.pack("<If", i, v) for i, v in pairs)


@pytest.mark.parametrize(
    ("code", "body", "reason"),
    [
        (F32, bytes(4 * 9), "bad_length"),
        (F16, bytes(2 * 11), "bad_length"),
        (I8, bytes(4 + 9), "bad_length"),
        (I8, bytes(4 + 10 + 4), "bad_length"),
        (TOPK, b"", "bad_length"),
        (TOPK, _topk([(i, 1.0) for i in range(11)]), "bad_length"),
        (TOPK, _topk([(0, 1.0), (10, 2.0)]), "bad_index"),
        (TOPK, _topk([(3, 1.0), (3, 2.0)]), "bad_index"),
        (TOPK, _topk([(5, 1.0), (2, 2.0)]), "bad_index"),
        (9, bytes(8), "codec"),
    ],
)
def test_decode_refuses_bodies_that_are_not_n_values(
    code: int, body: bytes, reason: str
) -> None:
    with pytest.raises(CodecError) as exc:
        decode_update(code, body, 10)
    assert exc.value.reason == reason


def test_non_finite_values_decode_as_such_for_the_core_to_refuse() -> None:
    # Prepare: an I8 block whose scale is NaN, a TOPK value that is Inf
    i8 = struct.pack("<f", float("nan")) + bytes(10)
    topk = _topk([(2, float("inf"))])

    # Execute
    a = decode_update(I8, i8, 10)
    b = decode_update(TOPK, topk, 10)

    # Assert
    assert not kernels.all_finite(a) and not kernels.all_finite(b)
