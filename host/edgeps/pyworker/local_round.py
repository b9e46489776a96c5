"""A CPython worker's local round and the job's card, over numpy buffers.

`NativeTrainer` delegates here: ``run`` takes H plain SGD steps at the job's
lr from the released parameters and leaves ``released - trained`` in the
gradient buffer (what ``encode_grad`` encodes and the PS applies as a
pseudo-gradient); a round of one step pushes that step's gradient, as the
board's `edgeps_worker.local_round` does. ``scaled`` applies the scaler a
WELCOME carries (f32 offsets then inverse stds) to the raw features.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
from edgeps_worker.local_round import plan

__all__ = ["moments", "plan", "run", "scaled"]


def run(
    t: Any,
    h: int,
    epochs: float,
    seconds: float,
    lr: float,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, int, int, memoryview]:
    """(mean loss, samples, steps, delta bytes) of one round of trainer ``t``
    (``params``, ``grad``, ``step()``, ``X``, ``batch``)."""
    anchor = t.params.copy()
    h = plan(h, epochs, int(t.X.shape[0]), int(t.batch))
    step = np.float32(lr)
    t0 = clock()
    k = samples = 0
    total = 0.0
    while True:
        loss, m, grad = t.step()
        k += 1
        samples += m
        total += loss * m
        done = clock() - t0 >= seconds if seconds > 0 else k >= h
        if done and k == 1:
            return loss, m, 1, grad  # one step: its gradient
        t.params -= step * t.grad
        if done:
            break
    np.subtract(anchor, t.params, out=t.grad)
    mean = total / samples if samples else float("nan")
    return mean, samples, k, t.grad.data.cast("B")


def scaled(raw: np.ndarray, data: Any) -> np.ndarray:
    """``raw`` standardised by a WELCOME's scaler bytes (offsets, 1 / stds)."""
    nf = raw.shape[1]
    s = np.frombuffer(bytes(data), dtype="<f4")
    if s.size != 2 * nf:
        raise ValueError(f"the job's scaler has {s.size // 2} features, the data {nf}")
    return np.ascontiguousarray((raw - s[:nf]) * s[nf:], dtype=np.float32)


def moments(raw: np.ndarray) -> tuple[int, list[float], list[float]] | None:
    """(rows, per-feature means, variances) of ``raw``, for HELLO; None if empty."""
    if raw.shape[0] == 0:
        return None
    x = raw.astype(np.float64)
    return int(x.shape[0]), x.mean(axis=0).tolist(), x.var(axis=0).tolist()
