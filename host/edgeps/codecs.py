"""Uplink codecs: the ``--compress`` choice, gradient encoding with error feedback,
and the PS's decoding of an UPDATE body back to float32.

The layouts are firmware/PROTOCOL.md's "Codes": F32, F16 (IEEE halves), I8
(blocks of an f32 scale and 128 int8, as native ``eps_int8_quantize``) and
TOPK (k records of u32 index, f32 value, indices strictly increasing). The
quantizers are the host kernels (``edgeps.kernels``: C through cffi when the
extension is built); TOPK selects with ``numpy.argpartition`` (O(n), then
a sort of the k chosen indices).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps import kernels as _kernels

F32, F16, I8, TOPK = wire.DTYPE_F32, wire.DTYPE_F16, wire.DTYPE_I8, wire.DTYPE_TOPK
BLOCK = wire.I8_BLOCK
NAMES = {"f32": F32, "f16": F16, "int8": I8, "topk": TOPK}
# what the CPython trainers produce (HELLO codecs)
ALL_CODECS = (1 << F32) | (1 << F16) | (1 << I8) | (1 << TOPK)
_TOPK_RECORD = np.dtype([("index", "<u4"), ("value", "<f4")])


@dataclass(frozen=True)
class Compress:
    """One uplink choice: a code and, for TOPK, the fraction of entries sent."""

    code: int = F32
    fraction: float = 0.0

    def __str__(self) -> str:
        name = wire.CODE_NAMES[self.code]
        return f"{name}:{self.fraction:g}" if self.code == TOPK else name

    def arg(self, n_params: int) -> int:
        """WELCOME's codec_arg: TOPK's k = max(1, round(F n)); 0 otherwise."""
        if self.code != TOPK:
            return 0
        return min(n_params, max(1, round(self.fraction * n_params)))

    def update_bytes(self, n_params: int) -> int:
        """Bytes of one UPDATE body of ``n_params`` values in this code."""
        return int(wire.encoded_len(self.code, n_params, self.arg(n_params)))


def parse_compress(text: str) -> Compress:
    """``f32``, ``f16``, ``int8`` or ``topk:F`` (0 < F <= 1) -> Compress."""
    if not isinstance(text, str):
        raise TypeError(f"--compress must be a string, got {text!r}")
    name, _, arg = text.strip().lower().partition(":")
    code = NAMES.get(name)
    if code is None:
        raise ValueError(f"--compress must be f32, f16, int8 or topk:F, got {text!r}")
    if code != TOPK:
        if arg:
            raise ValueError(f"--compress {name} takes no argument, got {text!r}")
        return Compress(code)
    try:
        fraction = float(arg)
    except ValueError:
        raise ValueError(
            f"--compress topk:F needs a fraction F, got {text!r}"
        ) from None
    if not (math.isfinite(fraction) and 0.0 < fraction <= 1.0):
        raise ValueError(f"--compress topk:F needs 0 < F <= 1, got {text!r}")
    return Compress(TOPK, fraction)


class GradEncoder:
    """Encode a float32 gradient in a code, keeping the error-feedback residual.

    For I8, TOPK and F16 the value coded is ``grad + residual`` and the
    residual becomes what was not sent. A gradient holding NaN or Inf raises
    ValueError before anything is encoded or the residual changes. The
    returned bytes are a view of a buffer reused by the next call.
    """

    def __init__(self, n_params: int, backend: Any = None) -> None:
        if n_params <= 0:
            raise ValueError("n_params must be positive")
        self.n = int(n_params)
        self.k = backend if backend is not None else _kernels
        self.residual = np.zeros(self.n, np.float32)
        self._code = F32  # the code the residual belongs to
        self._v = np.empty(self.n, np.float32)
        blocks = -(-self.n // BLOCK)
        self._i8 = np.zeros(blocks * (BLOCK + 4), np.uint8)

    def encode(self, grad: np.ndarray, code: int, arg: int = 0) -> memoryview:
        g = np.ascontiguousarray(grad, dtype=np.float32).reshape(-1)
        if g.shape[0] != self.n:
            raise ValueError(f"gradient has {g.shape[0]} values, expected {self.n}")
        if not self.k.all_finite(g):
            raise ValueError("gradient holds NaN or Inf: not encoded")
        if code != self._code:
            self.residual[:] = 0.0  # a residual of another code means nothing here
            self._code = code
        if code == F32:
            return g.astype("<f4", copy=False).data.cast("B")
        if code == F16:
            h = self.k.fp16_quantize(g, self.residual).astype("<u2", copy=False)
            return h.data.cast("B")
        if code == I8:
            return self._int8(g)
        if code == TOPK:
            return self._topk(g, int(arg))
        raise ValueError(f"unknown code {code!r}")

    def _int8(self, g: np.ndarray) -> memoryview:
        q, scales = self.k.int8_quantize(g, BLOCK, self.residual)
        return memoryview(pack_int8(q, scales, self._i8)).cast("B")

    def _topk(self, g: np.ndarray, k: int) -> memoryview:
        n = self.n
        k = min(n, max(1, k))
        v = self._v
        np.add(g, self.residual, out=v)
        if k < n:
            idx = np.argpartition(np.abs(v), n - k)[n - k :]
            idx.sort()
        else:
            idx = np.arange(n)
        rec = np.empty(k, _TOPK_RECORD)
        rec["index"] = idx
        rec["value"] = v[idx]
        self.residual[:] = v
        self.residual[idx] = 0.0
        return rec.view(np.uint8).data.cast("B")


def pack_int8(q: np.ndarray, scales: np.ndarray, out: np.ndarray | None = None) -> Any:
    """int8 values and per-block scales -> the I8 layout (blocks of scale, 128 q)."""
    n = q.shape[0]
    blocks = scales.shape[0]
    size = blocks * (BLOCK + 4)
    buf = out if out is not None and out.shape[0] >= size else np.zeros(size, np.uint8)
    grid = buf[:size].reshape(blocks, BLOCK + 4)
    grid[:, :4] = np.ascontiguousarray(scales, "<f4").view(np.uint8).reshape(blocks, 4)
    full = n // BLOCK
    qb = np.ascontiguousarray(q, np.int8).view(np.uint8)
    grid[:full, 4:] = qb[: full * BLOCK].reshape(full, BLOCK)
    rest = n - full * BLOCK
    if rest:
        grid[full, 4 : 4 + rest] = qb[full * BLOCK :]
    return buf[: int(wire.encoded_len(I8, n))]


class CodecError(ValueError):
    """An UPDATE body that cannot be a vector of n_params; ``reason`` counts it."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


def decode_update(code: int, data: Any, n_params: int) -> np.ndarray:
    """An UPDATE body in ``code`` -> float32 vector of ``n_params``, or CodecError.

    ``bad_length``: not ``encoded_len(code, n)`` bytes (TOPK: not 1..n
    records); ``bad_index``: a TOPK index out of range or not increasing.
    NaN/Inf values decode as such: the core refuses them (``non_finite``).
    """
    n = int(n_params)
    buf = memoryview(data).cast("B")
    total = buf.nbytes
    if code in (F32, F16):
        if total != wire.encoded_len(code, n):
            raise CodecError("bad_length", f"{total} bytes for {n} values")
        if code == F32:
            return np.frombuffer(buf, dtype="<f4")
        return np.asarray(_kernels.fp16_dequantize(np.frombuffer(buf, "<u2")))
    if code == I8:
        if total != wire.encoded_len(I8, n):
            raise CodecError("bad_length", f"{total} int8 bytes for {n} values")
        return unpack_int8(buf, n)
    if code == TOPK:
        if total % 8 or not 8 <= total <= 8 * n:
            raise CodecError("bad_length", f"{total} topk bytes for {n} values")
        rec = np.frombuffer(buf, _TOPK_RECORD)
        idx = rec["index"].astype(np.int64)
        if idx[-1] >= n or (idx.shape[0] > 1 and not bool(np.all(np.diff(idx) > 0))):
            raise CodecError("bad_index", "topk indices not increasing below n")
        out = np.zeros(n, np.float32)
        out[idx] = rec["value"]
        return out
    raise CodecError("codec", f"unknown code {code}")


def unpack_int8(data: Any, n: int) -> np.ndarray:
    """The I8 layout of ``n`` values -> float32 (q * scale of its block)."""
    blocks = -(-n // BLOCK)
    size = blocks * (BLOCK + 4)
    raw = np.frombuffer(memoryview(data).cast("B"), np.uint8)
    grid = np.zeros(size, np.uint8)
    grid[: raw.shape[0]] = raw
    grid2 = grid.reshape(blocks, BLOCK + 4)
    scales = np.ascontiguousarray(grid2[:, :4]).view("<f4").reshape(blocks)
    q = np.ascontiguousarray(grid2[:, 4:]).view(np.int8).reshape(-1)[:n]
    return np.asarray(_kernels.int8_dequantize(q, scales.astype(np.float32), BLOCK))
