"""Numpy reference for the models: vectorized, float32, numerically stable."""

from __future__ import annotations

import numpy as np

from edgeps.kernels import _check, _np_conv
from edgeps.kernels.spec import ModelSpec


def _layers(spec: ModelSpec, flat: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(flat[w].reshape(shape), flat[b]) for w, shape, b in spec._slices]


def _log_softmax(z: np.ndarray) -> np.ndarray:
    """Row-wise log-softmax via log-sum-exp, so huge logits cannot overflow."""
    s = z - z.max(axis=1, keepdims=True)
    s -= np.log(np.exp(s).sum(axis=1, keepdims=True))
    return s


def _sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)).astype(z.dtype)


def _hidden_forward(
    spec: ModelSpec, layers: list[tuple[np.ndarray, np.ndarray]], X: np.ndarray
) -> list[np.ndarray]:
    """Post-activation outputs of each hidden layer, input first."""
    acts = [X]
    h = X
    for W, b in layers[:-1]:
        h = h @ W
        h += b
        if spec.activation == "relu":
            np.maximum(h, 0, out=h)
        else:
            np.tanh(h, out=h)
        acts.append(h)
    return acts


def logits(spec: ModelSpec, params: np.ndarray, X: np.ndarray) -> np.ndarray:
    """Raw model outputs: (B,) for linear/logistic, (B, C) otherwise."""
    if spec.is_conv:
        return _np_conv.hidden_forward(spec.ops, params, X)[-1]
    layers = _layers(spec, params)
    h = _hidden_forward(spec, layers, X)[-1]
    W, b = layers[-1]
    z = h @ W
    z += b
    return z[:, 0] if spec.n_classes == 1 else z


def forward(spec: ModelSpec, params: np.ndarray, X: np.ndarray) -> np.ndarray:
    z = logits(spec, params, X)
    if spec.kind == "linear":
        return z
    if spec.kind == "logistic":
        return _sigmoid(z)
    return np.exp(_log_softmax(z))


def loss_and_grad(
    spec: ModelSpec, params: np.ndarray, X: np.ndarray, y: np.ndarray, g: np.ndarray
) -> float:
    """Mean loss; writes d(loss)/d(params) into ``g``."""
    B = X.shape[0]
    if spec.kind != "linear":
        n = 2 if spec.kind == "logistic" else spec.n_classes
        if y.min() < 0 or y.max() >= n:
            raise _check.bad_labels(spec, y)
    if spec.is_conv:
        acts = _np_conv.hidden_forward(spec.ops, params, X)
        z = acts[-1]
    else:
        layers = _layers(spec, params)
        grads = _layers(spec, g)
        acts = _hidden_forward(spec, layers, X)
        W, b = layers[-1]
        z = acts[-1] @ W
        z += b
    if spec.kind == "linear":
        r = z[:, 0] - y
        loss = float(np.dot(r, r)) / B
        dz = (r * np.float32(2.0 / B))[:, None]
    elif spec.kind == "logistic":
        zz = z[:, 0]
        yf = y.astype(np.float32)
        # softplus(z) - y z, with softplus written so exp never overflows
        loss = float(np.mean(np.maximum(zz, 0) - yf * zz + np.log1p(np.exp(-abs(zz)))))
        dz = ((_sigmoid(zz) - yf) * np.float32(1.0 / B))[:, None]
    else:
        ls = _log_softmax(z)
        rows = np.arange(B)
        loss = -float(ls[rows, y].sum(dtype=np.float64)) / B
        dz = np.exp(ls)
        dz[rows, y] -= 1.0
        dz *= np.float32(1.0 / B)
    if spec.is_conv:
        _np_conv.backward(spec.ops, params, acts, dz, g)
        return loss
    for i in range(len(layers) - 1, -1, -1):
        gW, gb = grads[i]
        np.matmul(acts[i].T, dz, out=gW)
        dz.sum(axis=0, out=gb)
        if i > 0:
            h = acts[i]
            dz = dz @ layers[i][0].T
            if spec.activation == "relu":
                dz *= h > 0
            else:
                dz *= 1.0 - h * h
    return loss
