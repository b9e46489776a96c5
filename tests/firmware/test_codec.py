"""Board codecs (firmware/edgeps_worker/codec.py) against the host's numpy/C kernels.

Encoders run under the real MicroPython unix binary and must give the same
bytes as ``int8_quantize(block=128)`` / ``fp16_quantize`` of both backends on
the same gradients, error feedback included; decoders must give the same
float32 as ``int8_dequantize`` / ``fp16_dequantize``. Refusals (NaN/Inf,
chunks that do not fit) are pure logic and also run on CPython.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import get_backend
from edgeps_worker import codec, codec_read

from tests.conftest import REPO, run_micropython

SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_codec.py")
N = 2410  # mlp:64-32-10
BACKENDS = ["numpy", "c"]


def gradients(seed: int, steps: int, n: int) -> np.ndarray:
    """Values over 12 decades, a tiny block, ties of the int8 and half roundings."""
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(steps, n)) * 10.0 ** rng.integers(-7, 4, size=(steps, n))
    g = g.astype(np.float32)
    g[0, 128:256] = np.float32(1e-31)  # a block below 1e-30: scale 0, all zeros
    g[0, n - 1] = np.float32(70000.0)  # past f16's largest: saturates
    s = min(steps - 1, 1)
    g[s, 5] = np.float32(0.49999997)
    g[s, 9] = np.float32(2.0**-25)  # a half tie: to even (0)
    g[s, 10] = np.float32(3 * 2.0**-25)  # a half tie: to even (2 * 2**-24)
    g[s, 11] = np.float32(-(2.0**-20))  # a half subnormal
    return g


def i8_body(q: np.ndarray, scales: np.ndarray) -> bytes:
    b = codec.BLOCK
    return b"".join(
        scales[k : k + 1].astype("<f4").tobytes() + q[k * b : (k + 1) * b].tobytes()
        for k in range(len(scales))
    )


def run(micropython: str, tmp_path: Path, mode: str, n: int, data: bytes, *extra):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    src.write_bytes(data)
    proc = run_micropython(
        micropython, SCRIPT, mode, str(n), str(src), str(out), *extra
    )
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return proc.stdout, out.read_bytes()


@pytest.mark.firmware
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("n", [N, 129])
def test_board_encoders_give_the_hosts_bytes(micropython, tmp_path, backend, n):
    # Prepare: 6 steps; step 4 holds a NaN, step 5 an Inf: both refused
    G = gradients(7, 6, n)
    G[4, n // 2] = np.nan
    G[5, 0] = np.inf
    ref = get_backend(backend)
    residual = np.zeros(n, np.float32)
    want = b""
    for g in G:
        if not np.isfinite(g).all():
            continue
        want += i8_body(*ref.int8_quantize(g, codec.BLOCK, residual))
        want += ref.fp16_quantize(g, None).astype("<u2").tobytes() + g.tobytes()
    want += residual.tobytes()
    # Execute
    stdout, got = run(micropython, tmp_path, "encode", n, G.tobytes())
    # Assert: the same bytes, and each refusal left the residual as it was
    assert got == want
    refused = [line for line in stdout.splitlines() if line.startswith("refused")]
    assert refused == [f"refused {s} {c}" for s in (4, 5) for c in (3, 2, 1)]


@pytest.mark.firmware
@pytest.mark.parametrize("keep", ["f32", "i8"])
def test_board_error_feedback_residual_stays_bounded(micropython, tmp_path, keep):
    # Prepare: one gradient with a large range inside each block, sent 300 times
    steps, n = 300, 300
    g = gradients(11, 1, n)[0]
    g[128:256] = np.float32(1e-3) * g[128:256] / np.abs(g[128:256]).max()
    # Execute
    _, raw = run(micropython, tmp_path, "feedback", n, g.tobytes(), str(steps), keep)
    # Assert: every step's residual is at most half a quantization step, and what
    # was sent plus what is left is what was to be sent: nothing piles up (kept
    # as int8, each step loses at most half a step, under 1/256 of a scale)
    size = codec.encoded_len(codec.I8, n)
    rsize = 4 * n if keep == "f32" else n
    sent = np.zeros(n, np.float64)
    worst = 0.0
    for s in range(steps):
        at = s * (size + rsize)
        body = raw[at : at + size]
        scales = np.array([np.frombuffer(body, "<f4", 1, k * 132)[0]
                           for k in range(0, n // codec.BLOCK + 1)])  # fmt: skip
        if keep == "f32":
            res = np.frombuffer(raw[at + size : at + size + rsize], np.float32)
        else:
            # int8 steps of 2**(e - 7), e the exponent of the block's scale
            rq = np.frombuffer(raw[at + size : at + size + rsize], np.int8)
            e = (scales.astype(np.float32).view(np.uint32) >> 23).astype(int) - 127
            step = np.repeat(np.ldexp(1.0, e - 7), 128)
            res = (rq * step[:n]).astype(np.float32)
        sent += decode_i8(body, n)
        for k in range(0, n, codec.BLOCK):
            scale = scales[k // codec.BLOCK]
            blk = np.abs(res[k : k + codec.BLOCK])
            # kept as int8, rounding adds up to half a step
            slack = 0.0 if keep == "f32" else 0.5 * step[k]
            assert blk.max() <= 0.5 * scale * (1 + 1e-5) + slack + 1e-37
            worst = max(worst, float(blk.max() / scale) if scale else 0.0)
    total = np.float64(steps) * g.astype(np.float64)
    err = np.abs(sent + res - total)
    tol = 1e-4 if keep == "f32" else 1e-3
    assert err.max() <= tol * np.abs(total).max()
    print(
        f"\nI8 residual kept as {keep}: at most {worst:.3f} of a scale over {steps}"
        f" steps, sent + residual off by {err.max() / np.abs(total).max():.1e}"
    )


def decode_i8(body: bytes, n: int) -> np.ndarray:
    out = np.zeros(n, np.float32)
    for k in range(0, n, codec.BLOCK):
        at = k // codec.BLOCK * (4 + codec.BLOCK)
        m = min(codec.BLOCK, n - k)
        scale = np.frombuffer(body, "<f4", 1, at)
        q = np.frombuffer(body, np.int8, m, at + 4)
        out[k : k + m] = get_backend("numpy").int8_dequantize(q, scale, codec.BLOCK)
    return out


@pytest.mark.firmware
@pytest.mark.parametrize(("mode", "chunk"), [("f16", 1024), ("f16", 2), ("i8", 1056),
                                             ("i8", 132)])  # fmt: skip
def test_board_write_params_decodes_like_the_host(micropython, tmp_path, mode, chunk):
    # Prepare: the host's encoding of one parameter vector
    ref = get_backend("c")
    p = gradients(5, 4, N)[3]
    if mode == "f16":
        data = ref.fp16_quantize(p, None).astype("<u2").tobytes()
        want = ref.fp16_dequantize(np.frombuffer(data, "<u2"))
    else:
        q, sc = ref.int8_quantize(p, codec.BLOCK, None)
        data, want = i8_body(q, sc), ref.int8_dequantize(q, sc, codec.BLOCK)
    # Execute: chunk by chunk, as PARAMS arrive
    _, raw = run(micropython, tmp_path, mode, N, data, str(chunk))
    # Assert: the same float32 bits
    assert raw == want.astype("<f4").tobytes()


@pytest.mark.parametrize(
    ("code", "offset", "data"),
    [
        (codec.F16, 0, b"\x00\x7c" + b"\x00" * 6),  # +Inf half
        (codec.F16, 0, b"\x00\x3c" * 4 + b"\x01\xfe"),  # NaN half
        (codec.F16, 1, b"\x00\x3c"),  # not on a record
        (codec.F16, 18, b"\x00\x3c\x00\x3c"),  # past the vector
        (codec.F32, 38, b"\x00\x00\x80\x3f"),  # F32 past the vector
        (codec.I8, 0, b"\x00\x00\x80\x7f" + b"\x01" * 10),  # Inf scale
        (codec.I8, 0, np.float32(3e36).tobytes() + b"\x7f" * 10),  # q * scale inf
        (codec.I8, 0, np.float32(1e-40).tobytes() + b"\x01" * 10),  # subnormal
        (codec.I8, 0, b"\x00\x00\x80\x3f" + b"\x01" * 9),  # short last block
        (codec.I8, 0, b"\x00\x00\x80\x3f"),  # a scale alone
        (codec.I8, 66, b"\x00\x00\x80\x3f" + b"\x01" * 10),  # not on a record
        (7, 0, b"\x00" * 8),  # unknown dtype
    ],
)
def test_write_params_refuses_a_bad_chunk_and_writes_nothing(code, offset, data):
    params = array("f", [1.5] * 10)
    with pytest.raises(ValueError):
        codec_read.write_params(params, code, offset, memoryview(data))
    assert list(params) == [1.5] * 10


def residual_bytes(c: codec.GradCodec) -> bytes:
    return b"".join(bytes(rb) for rb in c.residual)


def test_encode_refuses_nan_before_touching_the_residual():
    # Prepare: one I8 step leaves a residual
    n = 200
    g = array("f", gradients(3, 1, n)[0].tobytes())
    c = codec.GradCodec(n)
    c.encode(codec.I8, g)
    before = residual_bytes(c)
    for bad in (float("nan"), float("inf"), float("-inf")):
        g = array("f", gradients(4, 1, n)[0].tobytes())
        g[150] = bad
        # Execute / Assert
        for code in (codec.I8, codec.F16, codec.F32):
            with pytest.raises(ValueError):
                c.encode(code, g)
            assert residual_bytes(c) == before
    # a sum that overflows float32 is refused as well
    g = array("f", [0.0] * n)
    g[0] = 3.4e38
    c.residual[0][0] = 3.4e38
    before = residual_bytes(c)
    with pytest.raises(ValueError):
        c.encode(codec.I8, g)
    assert residual_bytes(c) == before


@pytest.mark.parametrize("n", [1, 2, 3, 127, 128, 129, 257])
@pytest.mark.parametrize("backend", BACKENDS)
def test_i8_block_edges_give_the_hosts_bytes_on_cpython(n, backend):
    # n = 1: the body is longer than the vector, so it is not written in place
    ref = get_backend(backend)
    g = np.random.default_rng(n).normal(size=n).astype(np.float32)
    residual = np.zeros(n, np.float32)
    c = codec.GradCodec(n)
    for _ in range(3):
        want = i8_body(*ref.int8_quantize(g, codec.BLOCK, residual))
        assert bytes(c.encode(codec.I8, array("f", g.tobytes()))) == want
        assert residual_bytes(c) == residual.tobytes()
