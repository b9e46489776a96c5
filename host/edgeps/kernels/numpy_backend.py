"""The pure-numpy reference backend: always available, the yardstick for C."""

from __future__ import annotations

import numpy as np

from edgeps.kernels import _np_models, _np_ops
from edgeps.kernels.base import Kernels
from edgeps.kernels.spec import ModelSpec


class NumpyKernels(Kernels):
    """Vectorized numpy implementations of every kernel."""

    name = "numpy"

    def _loss_grad(
        self, s: ModelSpec, p: np.ndarray, X: np.ndarray, y: np.ndarray, g: np.ndarray
    ) -> float:
        return _np_models.loss_and_grad(s, p, X, y, g)

    def _forward(self, s: ModelSpec, p: np.ndarray, X: np.ndarray) -> np.ndarray:
        return _np_models.forward(s, p, X)

    def _sgd(self, p: np.ndarray, g: np.ndarray, lr: float) -> None:
        _np_ops.sgd_step(p, g, lr)

    def _momentum(
        self, p: np.ndarray, g: np.ndarray, v: np.ndarray, lr: float, mu: float
    ) -> None:
        _np_ops.momentum_step(p, g, v, lr, mu)

    def _adam(
        self,
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
        _np_ops.adam_step(p, g, m, v, t, lr, b1, b2, eps)

    def _l2_norm(self, x: np.ndarray) -> float:
        return _np_ops.l2_norm(x)

    def _all_finite(self, x: np.ndarray) -> bool:
        return _np_ops.all_finite(x)

    def _fp16_q(self, x: np.ndarray, r: np.ndarray | None) -> np.ndarray:
        return _np_ops.fp16_quantize(x, r)

    def _fp16_dq(self, q: np.ndarray) -> np.ndarray:
        return _np_ops.fp16_dequantize(q)

    def _int8_q(
        self, x: np.ndarray, block: int, r: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        return _np_ops.int8_quantize(x, block, r)

    def _int8_dq(self, q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
        return _np_ops.int8_dequantize(q, scales, block)
