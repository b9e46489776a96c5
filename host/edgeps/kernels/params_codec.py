"""PARAMS codes on the host: encode a parameter vector, decode a chunk into float32.

Layouts as in firmware/PROTOCOL.md (Dtypes): F32 n singles; F16 n halves
(round to nearest even, saturating at +-65504); I8 ceil(n/128) blocks of a
float32 scale then 128 int8 (the last block holds the rest), value = q * scale.
The PS encodes with ``encode``; a CPython worker decodes each chunk with
``decode_into`` (its trainer's ``write_params``); ``decoded`` is the vector a
worker holds after the release, whose digest a RELEASE carries.
"""

from __future__ import annotations

import hashlib

import numpy as np
from edgeps_worker import wire

from edgeps import kernels

I8_BLOCK = wire.I8_BLOCK
I8_RECORD = wire.RECORD[wire.DTYPE_I8]  # bytes of one full I8 block
RECORD = wire.RECORD
NAMES = {"f32": wire.DTYPE_F32, "f16": wire.DTYPE_F16, "int8": wire.DTYPE_I8}


def parse_code(text: str) -> int:
    """``"f32" | "f16" | "int8"`` -> the PARAMS code; anything else is a ValueError."""
    code = NAMES.get(text)
    if code is None:
        raise ValueError(f"--compress-down must be one of f32, f16, int8, got {text!r}")
    return code


def encoded_len(code: int, n: int) -> int:
    """Bytes of n parameters in PARAMS code ``code`` (``wire.encoded_len``)."""
    if code not in NAMES.values():
        raise ValueError(f"unknown PARAMS code {code!r}")
    return int(wire.encoded_len(code, n))


def encode(params: np.ndarray, code: int) -> bytes | memoryview:
    """The PARAMS body of ``params`` (float32, flat) in ``code``."""
    p = np.ascontiguousarray(params, dtype="<f4")
    if code == wire.DTYPE_F32:
        return p.data.cast("B")
    if code == wire.DTYPE_F16:
        return kernels.fp16_quantize(p).astype("<u2").tobytes()
    if code != wire.DTYPE_I8:
        raise ValueError(f"unknown PARAMS code {code!r}")
    n = p.shape[0]
    q, scales = kernels.int8_quantize(p, I8_BLOCK)
    nb = scales.shape[0]
    out = np.zeros((nb, I8_RECORD), np.uint8)
    out[:, :4] = scales.astype("<f4").view(np.uint8).reshape(nb, 4)
    body = np.zeros(nb * I8_BLOCK, np.int8)
    body[:n] = q
    out[:, 4:] = body.view(np.uint8).reshape(nb, I8_BLOCK)
    return out.reshape(-1)[: encoded_len(code, n)].tobytes()


def decode_into(out: np.ndarray, code: int, offset: int, data: object) -> None:
    """Decode one chunk (encoded byte ``offset``, its bytes) into ``out`` (float32).

    Raises ValueError for a chunk that does not fit ``out``, is not cut on a
    record, or holds NaN/Inf (nothing is written then).
    """
    raw = np.frombuffer(memoryview(data).cast("B"), np.uint8)  # type: ignore[arg-type]
    n = out.shape[0]
    if code == wire.DTYPE_F32:
        if offset % 4 or raw.size % 4 or offset + raw.size > 4 * n:
            raise ValueError("F32 chunk does not fit the parameters")
        out.view(np.uint8)[offset : offset + raw.size] = raw
        return
    if code == wire.DTYPE_F16:
        if offset % 2 or raw.size % 2 or offset // 2 + raw.size // 2 > n:
            raise ValueError("F16 chunk does not fit the parameters")
        vals = kernels.fp16_dequantize(raw.view("<u2").astype(np.uint16))
        start = offset // 2
    elif code == wire.DTYPE_I8:
        vals, start = _i8_values(raw, offset, n)
    else:
        raise ValueError(f"unknown PARAMS code {code!r}")
    if not np.isfinite(vals).all():
        raise ValueError("PARAMS chunk holds NaN or Inf")
    out[start : start + vals.shape[0]] = vals


def _i8_values(raw: np.ndarray, offset: int, n: int) -> tuple[np.ndarray, int]:
    if offset % I8_RECORD:
        raise ValueError("I8 chunk does not start on a block")
    full, rest = divmod(raw.size, I8_RECORD)
    start = offset // I8_RECORD * I8_BLOCK
    if rest and rest < 5:
        raise ValueError("I8 chunk ends inside a block's scale")
    count = full * I8_BLOCK + (rest - 4 if rest else 0)
    if start + count > n or rest and start + count != n:
        raise ValueError("I8 chunk does not fit the parameters")
    padded = np.zeros((full + (1 if rest else 0)) * I8_RECORD, np.uint8)
    padded[: raw.size] = raw
    blocks = padded.reshape(-1, I8_RECORD)
    scales = blocks[:, :4].copy().view("<f4").reshape(-1).astype(np.float32)
    if not np.isfinite(scales).all():
        raise ValueError("I8 chunk has a NaN or Inf scale")
    q = blocks[:, 4:].copy().view(np.int8).reshape(-1)[:count]
    return kernels.int8_dequantize(q, scales, I8_BLOCK), start


def digest(held: np.ndarray) -> bytes:
    """What a RELEASE names: SHA-256 of the held float32 vector's bytes, first 16."""
    raw = np.ascontiguousarray(held, dtype="<f4").tobytes()
    return hashlib.sha256(raw).digest()[:16]


def decoded(params: np.ndarray, code: int) -> np.ndarray:
    """The float32 vector a worker holds after a release of ``params`` in ``code``."""
    p = np.ascontiguousarray(params, dtype=np.float32)
    if code == wire.DTYPE_F32:
        return p
    out = np.empty_like(p)
    decode_into(out, code, 0, encode(p, code))
    return out
