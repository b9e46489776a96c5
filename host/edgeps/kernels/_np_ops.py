"""Numpy reference for optimizer steps and update helpers (norms, quantizers)."""

from __future__ import annotations

import numpy as np

FP16_MAX = np.float32(65504.0)
# int8 blocks whose max |v| is below this are sent as zeros (scale 0), so
# 127 / max can never overflow; error feedback keeps such values in the residual
INT8_TINY = np.float32(1e-30)


def sgd_step(p: np.ndarray, g: np.ndarray, lr: float) -> None:
    p -= np.float32(lr) * g


def momentum_step(
    p: np.ndarray, g: np.ndarray, v: np.ndarray, lr: float, mu: float
) -> None:
    v *= np.float32(mu)
    v += g
    p -= np.float32(lr) * v


def adam_step(
    p: np.ndarray,
    g: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    t: int,
    lr: float,
    b1: float,
    b2: float,
    eps: float,
) -> None:
    m *= np.float32(b1)
    m += np.float32(1.0 - b1) * g
    v *= np.float32(b2)
    v += np.float32(1.0 - b2) * (g * g)
    # bias corrections folded into the step size and eps, as in the Adam paper
    c1 = 1.0 - b1**t
    c2 = 1.0 - b2**t
    step = np.sqrt(v)
    step *= np.float32(1.0 / np.sqrt(c2))
    step += np.float32(eps)
    np.divide(m, step, out=step)
    step *= np.float32(lr / c1)
    p -= step


def l2_norm(x: np.ndarray) -> float:
    with np.errstate(over="ignore"):
        s = float(np.dot(x, x))
    if s == np.inf:
        # squares overflowed float32: rescale by the largest magnitude
        a = float(np.max(np.abs(x)))
        if np.isfinite(a):
            xs = x / np.float32(a)
            return a * float(np.sqrt(np.dot(xs, xs)))
    return float(np.sqrt(s))


def clip_norm_(x: np.ndarray, max_norm: float) -> float:
    n = l2_norm(x)
    if n > max_norm:
        scale = max_norm / n
        x *= np.float32(scale)
        return float(np.float32(scale))
    return 1.0


def all_finite(x: np.ndarray) -> bool:
    return bool(np.isfinite(x).all())


def _with_residual(x: np.ndarray, residual: np.ndarray | None) -> np.ndarray:
    return x if residual is None else x + residual


def fp16_quantize(x: np.ndarray, residual: np.ndarray | None) -> np.ndarray:
    v = _with_residual(x, residual)
    # saturate instead of overflowing to inf, so the residual stays finite
    h = np.clip(v, -FP16_MAX, FP16_MAX).astype(np.float16)
    if residual is not None:
        np.subtract(v, h.astype(np.float32), out=residual)
    return h.view(np.uint16)


def fp16_dequantize(q: np.ndarray) -> np.ndarray:
    return q.view(np.float16).astype(np.float32)


def int8_quantize(
    x: np.ndarray, block: int, residual: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    v = _with_residual(x, residual)
    n = v.shape[0]
    nb = (n + block - 1) // block
    pad = nb * block - n
    vb = (np.concatenate([v, np.zeros(pad, np.float32)]) if pad else v).reshape(
        nb, block
    )
    amax = np.abs(vb).max(axis=1)
    if not np.isfinite(amax).all():
        raise ValueError("int8_quantize: input holds NaN or Inf")
    amax = np.where(amax >= INT8_TINY, amax, np.float32(0.0))
    scales = amax / np.float32(127.0)
    safe = np.where(amax > 0, amax, np.float32(1.0))
    inv = np.where(amax > 0, np.float32(127.0) / safe, np.float32(0.0))
    r = vb * inv[:, None]
    # round half away from zero, the same rule as the C kernel
    r += np.copysign(np.float32(0.5), r)
    qf = np.trunc(r, out=r)
    np.clip(qf, -127, 127, out=qf)
    q = qf.astype(np.int8).reshape(-1)[:n]
    if residual is not None:
        qf *= scales[:, None]
        np.subtract(v, qf.reshape(-1)[:n], out=residual)
    return q, scales.astype(np.float32)


def int8_dequantize(q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    return q.astype(np.float32) * np.repeat(scales, block)[: q.shape[0]]
