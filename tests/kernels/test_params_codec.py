"""PARAMS codes on the host against a numpy reference written from the spec."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.kernels import params_codec
from edgeps_worker import wire


def i8_reference(v: np.ndarray) -> bytes:
    """Blocks of 128: scale = max|v|/127 (f32 LE), q = round-half-away(v/scale)."""
    out = b""
    for a in range(0, v.shape[0], 128):
        block = v[a : a + 128].astype(np.float64)
        amax = np.float32(np.abs(block).max())
        scale = np.float32(amax / np.float32(127)) if amax >= 1e-30 else np.float32(0)
        if scale:
            r = block.astype(np.float32) * (np.float32(127) / amax)
            q = np.clip(np.trunc(r + np.copysign(0.5, r)), -127, 127)
        else:
            q = np.zeros(block.shape[0])
        out += np.array([scale], "<f4").tobytes() + q.astype(np.int8).tobytes()
    return out


@pytest.mark.parametrize("n", [1, 127, 128, 129, 1000])
def test_encodings_match_the_reference_and_decode_back(n: int):
    # Prepare
    rng = np.random.default_rng(n)
    v = (rng.normal(size=n) * 3).astype(np.float32)
    v[0] = 1e5  # F16 saturates at 65504
    # Execute
    f16 = bytes(params_codec.encode(v, wire.DTYPE_F16))
    i8 = bytes(params_codec.encode(v, wire.DTYPE_I8))
    # Assert
    ref16 = np.clip(v, -65504, 65504).astype("<f2")
    assert f16 == ref16.tobytes()
    assert i8 == i8_reference(v)
    assert len(i8) == params_codec.encoded_len(wire.DTYPE_I8, n)
    np.testing.assert_array_equal(
        params_codec.decoded(v, wire.DTYPE_F16), ref16.astype(np.float32)
    )
    held = params_codec.decoded(v, wire.DTYPE_I8)
    block_max = np.array([np.abs(v[a : a + 128]).max() for a in range(0, n, 128)])
    err = np.abs(held - v).reshape(-1)
    # round to nearest: at most half a step (max|v|/127/2) of each block
    bound = np.repeat(block_max / 127 / 2 * 1.0001, 128)[:n]
    assert np.all(err <= bound)


def test_a_chunk_not_cut_on_a_record_or_too_long_is_refused():
    out = np.zeros(300, np.float32)
    body = bytes(params_codec.encode(np.ones(300, np.float32), wire.DTYPE_I8))
    with pytest.raises(ValueError, match="block"):
        params_codec.decode_into(out, wire.DTYPE_I8, 5, body[5:137])
    with pytest.raises(ValueError, match="fit"):
        params_codec.decode_into(out, wire.DTYPE_F16, 500, b"\0" * 200)
    with pytest.raises(ValueError, match="NaN"):
        params_codec.decode_into(out, wire.DTYPE_F16, 0, b"\x00\x7c")  # +inf
    assert not out.any()


def test_compress_down_names():
    assert params_codec.parse_code("int8") == wire.DTYPE_I8
    with pytest.raises(ValueError, match="compress-down"):
        params_codec.parse_code("topk:0.1")
