"""Numpy reference for conv models: each layer's forward and backward (im2col).

The yardstick the C and board kernels are tested against. Windows are taken
with ``sliding_window_view`` (no copy until the contraction), and a layer's
input gradient is scattered back one kernel tap at a time, so no index
arrays are built.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from edgeps.kernels.layers import Op


def _pad(x: np.ndarray, p: int) -> np.ndarray:
    if p == 0:
        return x
    width = [(0, 0), (0, 0)] + [(p, p)] * (x.ndim - 2)
    return np.pad(x, width)


def _windows(x: np.ndarray, k: int, s: int, out_sp: tuple[int, ...]) -> np.ndarray:
    """(B, C, *out_sp, *(k,)*dims): every kernel window, strided, as a view."""
    dims = x.ndim - 2
    axes = tuple(range(2, 2 + dims))
    w = sliding_window_view(x, (k,) * dims, axis=axes)
    sl = (slice(None), slice(None)) + tuple(
        slice(0, s * (n - 1) + 1, s) for n in out_sp
    )
    return w[sl]


def _taps(dims: int, k: int) -> list[tuple[int, ...]]:
    return (
        [(i,) for i in range(k)]
        if dims == 1
        else [(i, j) for i in range(k) for j in range(k)]
    )


def _tap_slice(
    tap: tuple[int, ...], s: int, out_sp: tuple[int, ...]
) -> tuple[slice, ...]:
    return (slice(None), slice(None)) + tuple(
        slice(t, t + s * (n - 1) + 1, s) for t, n in zip(tap, out_sp, strict=True)
    )


def conv_forward(op: Op, W: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    ly = op.layer
    dims = x.ndim - 2
    out_sp = op.out_shape[1:]
    win = _windows(_pad(x, ly.pad), ly.k, ly.stride, out_sp)
    # contract channel and kernel axes: (B, *sp, C*k^d) @ (C*k^d, N)
    B = x.shape[0]
    cols = np.moveaxis(win, 1, 1 + dims).reshape(B, *out_sp, -1)
    y = cols @ W.reshape(W.shape[0], -1).T
    y += b
    return np.ascontiguousarray(np.moveaxis(y, -1, 1))


def conv_backward(
    op: Op,
    W: np.ndarray,
    x: np.ndarray,
    dy: np.ndarray,
    gW: np.ndarray,
    gb: np.ndarray,
    need_dx: bool,
) -> np.ndarray | None:
    ly = op.layer
    dims = x.ndim - 2
    out_sp = op.out_shape[1:]
    xp = _pad(x, ly.pad)
    win = _windows(xp, ly.k, ly.stride, out_sp)
    N = dy.shape[1]
    cols = np.moveaxis(win, 1, 1 + dims).reshape(-1, W[0].size)
    dyf = np.moveaxis(dy, 1, -1).reshape(-1, N)
    gW[...] = (dyf.T @ cols).reshape(W.shape)
    gb[...] = dyf.sum(axis=0)
    if not need_dx:
        return None
    dxp = np.zeros_like(xp)
    for tap in _taps(dims, ly.k):
        index: tuple[slice | int, ...] = (slice(None), slice(None), *tap)
        wt = W[index]  # (N, C)
        contrib = np.tensordot(dy, wt, axes=([1], [0]))  # (B, *sp, C)
        dxp[_tap_slice(tap, ly.stride, out_sp)] += np.moveaxis(contrib, -1, 1)
    if ly.pad:
        inner = (slice(None), slice(None)) + (slice(ly.pad, -ly.pad),) * dims
        return np.ascontiguousarray(dxp[inner])
    return dxp


def pool_forward(op: Op, x: np.ndarray) -> np.ndarray:
    ly = op.layer
    dims = x.ndim - 2
    win = _windows(x, ly.k, ly.stride, op.out_shape[1:])
    axes = tuple(range(-dims, 0))
    if op.op == "maxpool":
        return np.ascontiguousarray(win.max(axis=axes))
    return np.ascontiguousarray(win.mean(axis=axes), dtype=x.dtype)


def pool_backward(op: Op, x: np.ndarray, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    """The gradient to the input; a max pool's goes to the first maximum."""
    ly = op.layer
    dims = x.ndim - 2
    out_sp = op.out_shape[1:]
    dx = np.zeros_like(x)
    if op.op == "avgpool":
        share = dy * dy.dtype.type(1.0 / ly.k**dims)
        for tap in _taps(dims, ly.k):
            dx[_tap_slice(tap, ly.stride, out_sp)] += share
        return dx
    taken = np.zeros(dy.shape, dtype=bool)
    for tap in _taps(dims, ly.k):
        sl = _tap_slice(tap, ly.stride, out_sp)
        hit = (x[sl] == y) & ~taken
        taken |= hit
        dx[sl] += np.where(hit, dy, np.float32(0.0))
    return dx


def hidden_forward(
    ops: tuple[Op, ...], params: np.ndarray, X: np.ndarray
) -> list[np.ndarray]:
    """Inputs to every layer and the logits: acts[i] is layer i's input."""
    acts = [X.reshape(X.shape[0], *ops[0].in_shape)]
    h = acts[0]
    for op in ops:
        if op.op == "conv":
            W = params[op.w].reshape(op.w_shape)
            h = conv_forward(op, W, params[op.b], h)
        elif op.op == "dense":
            W = params[op.w].reshape(op.w_shape)
            h = h.reshape(h.shape[0], -1) @ W
            h += params[op.b]
        else:
            h = pool_forward(op, h)
        if op.layer.relu and op.op in ("conv", "dense"):
            np.maximum(h, 0, out=h)
        acts.append(h)
    return acts


def backward(
    ops: tuple[Op, ...],
    params: np.ndarray,
    acts: list[np.ndarray],
    dz: np.ndarray,
    g: np.ndarray,
) -> None:
    """Writes d(loss)/d(params) into g, given d(loss)/d(logits) dz."""
    dy = dz
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        x, y = acts[i], acts[i + 1]
        if op.layer.relu and op.op in ("conv", "dense"):
            dy = dy * (y > 0)
        if op.op == "dense":
            W = params[op.w].reshape(op.w_shape)
            xf = x.reshape(x.shape[0], -1)
            g[op.w] = (xf.T @ dy).reshape(-1)
            g[op.b] = dy.sum(axis=0)
            if i > 0:
                dy = (dy @ W.T).reshape(x.shape)
        elif op.op == "conv":
            W = params[op.w].reshape(op.w_shape)
            gW = g[op.w].reshape(op.w_shape)
            gb = g[op.b]
            dx = conv_backward(op, W, x, dy, gW, gb, i > 0)
            if dx is not None:
                dy = dx
        else:
            dy = pool_backward(op, x, y, dy)
