"""The kernel API as a class: public methods check arguments, backends do the math.

Both backends subclass ``Kernels`` and override the underscore hooks (or, for
speed, a whole public method), so argument checking is written once.
"""

from __future__ import annotations

import numpy as np

from edgeps.kernels import _check
from edgeps.kernels.spec import ModelSpec


class Kernels:
    """Model math, optimizer steps and update helpers on flat float32 vectors."""

    name = "abstract"

    # ---- backend hooks (arguments already checked) ----
    def _loss_grad(
        self, s: ModelSpec, p: np.ndarray, X: np.ndarray, y: np.ndarray, g: np.ndarray
    ) -> float:
        raise NotImplementedError

    def _forward(self, s: ModelSpec, p: np.ndarray, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _predict(self, s: ModelSpec, p: np.ndarray, X: np.ndarray) -> np.ndarray:
        out = self._forward(s, p, X)
        if s.kind == "linear":
            return out
        if s.kind == "logistic":
            return (out >= 0.5).astype(np.int32)
        return np.argmax(out, axis=1).astype(np.int32)

    # ---- models ----
    def loss_and_grad(
        self,
        spec: ModelSpec,
        params: np.ndarray,
        X: np.ndarray,
        y: np.ndarray,
        grad_out: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray]:
        """Mean loss over the batch and its gradient w.r.t. the flat params."""
        s = _check.spec(spec)
        p, x = _check.batch(s, params, X)
        t = _check.targets(s, y, x.shape[0])
        g = _check.grad_buffer(s, grad_out)
        return self._loss_grad(s, p, x, t, g), g

    def forward(self, spec: ModelSpec, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Values (linear), P(y=1) (logistic) or class probabilities (B, C)."""
        s = _check.spec(spec)
        p, x = _check.batch(s, params, X)
        return self._forward(s, p, x)

    def predict(self, spec: ModelSpec, params: np.ndarray, X: np.ndarray) -> np.ndarray:
        """Values for linear, int32 class ids otherwise."""
        s = _check.spec(spec)
        p, x = _check.batch(s, params, X)
        return self._predict(s, p, x)

    def accuracy(
        self, spec: ModelSpec, params: np.ndarray, X: np.ndarray, y: np.ndarray
    ) -> float:
        """Fraction of correct class ids (for linear: of |error| < 0.5)."""
        s = _check.spec(spec)
        p, x = _check.batch(s, params, X)
        t = _check.targets(s, y, x.shape[0])
        pred = self._predict(s, p, x)
        if s.kind == "linear":
            return float(np.mean(np.abs(pred - t) < 0.5))
        return float(np.mean(pred == t))

    # ---- optimizers (in place) ----
    def _sgd(self, p: np.ndarray, g: np.ndarray, lr: float) -> None:
        raise NotImplementedError

    def _momentum(
        self, p: np.ndarray, g: np.ndarray, v: np.ndarray, lr: float, mu: float
    ) -> None:
        raise NotImplementedError

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
        raise NotImplementedError

    def sgd_step(self, params: np.ndarray, grad: np.ndarray, lr: float) -> None:
        """params -= lr * grad, in place."""
        p = _check.writable("params", _check.vector("params", params))
        g = _check.vector("grad", grad, p.shape[0])
        self._sgd(p, g, _check.scalar("lr", lr))

    def momentum_step(
        self,
        params: np.ndarray,
        grad: np.ndarray,
        velocity: np.ndarray,
        lr: float,
        momentum: float,
    ) -> None:
        """velocity = momentum * velocity + grad; params -= lr * velocity."""
        p = _check.writable("params", _check.vector("params", params))
        g = _check.vector("grad", grad, p.shape[0])
        v = _check.same_length("velocity", velocity, p)
        self._momentum(
            p, g, v, _check.scalar("lr", lr), _check.unit("momentum", momentum)
        )

    def adam_step(
        self,
        params: np.ndarray,
        grad: np.ndarray,
        m: np.ndarray,
        v: np.ndarray,
        t: int,
        lr: float,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
    ) -> None:
        """One Adam step (t counts from 1); m and v are the caller's moment buffers."""
        p = _check.writable("params", _check.vector("params", params))
        g = _check.vector("grad", grad, p.shape[0])
        mm = _check.same_length("m", m, p)
        vv = _check.same_length("v", v, p)
        self._adam(
            p,
            g,
            mm,
            vv,
            _check.step_count(t),
            _check.scalar("lr", lr),
            _check.unit("beta1", beta1),
            _check.unit("beta2", beta2),
            _check.scalar("eps", eps, positive=True),
        )

    # ---- update helpers ----
    def _l2_norm(self, x: np.ndarray) -> float:
        raise NotImplementedError

    def _scale(self, x: np.ndarray, scale: float) -> None:
        x *= np.float32(scale)

    def _all_finite(self, x: np.ndarray) -> bool:
        raise NotImplementedError

    def _fp16_q(self, x: np.ndarray, r: np.ndarray | None) -> np.ndarray:
        raise NotImplementedError

    def _fp16_dq(self, q: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _int8_q(
        self, x: np.ndarray, block: int, r: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _int8_dq(self, q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
        raise NotImplementedError

    def l2_norm(self, x: np.ndarray) -> float:
        """Euclidean norm, robust to squares that overflow float32."""
        return self._l2_norm(_check.vector("x", x))

    def clip_norm_(self, x: np.ndarray, max_norm: float) -> float:
        """Scale x in place so its norm is at most max_norm; return the scale used."""
        v = _check.writable("x", _check.vector("x", x))
        limit = _check.scalar("max_norm", max_norm, positive=True)
        n = self._l2_norm(v)
        if n > limit:
            scale = float(np.float32(limit / n))
            self._scale(v, scale)
            return scale
        return 1.0

    def all_finite(self, x: np.ndarray) -> bool:
        """True if x holds no NaN and no Inf."""
        return self._all_finite(_check.vector("x", x))

    def fp16_quantize(
        self, x: np.ndarray, residual: np.ndarray | None = None
    ) -> np.ndarray:
        """IEEE half bits (uint16), saturating at +-65504; residual: error feedback."""
        v = _check.vector("x", x)
        r = None if residual is None else _check.same_length("residual", residual, v)
        return self._fp16_q(v, r)

    def fp16_dequantize(self, q: np.ndarray) -> np.ndarray:
        """Half bits (uint16) back to float32."""
        return self._fp16_dq(_check.array("q", q, _check.U16))

    def int8_quantize(
        self, x: np.ndarray, block: int, residual: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Symmetric int8 with one scale (max|x|/127) per block of ``block`` values."""
        v = _check.vector("x", x)
        b = _check.block_size(block)
        r = None if residual is None else _check.same_length("residual", residual, v)
        return self._int8_q(v, b, r)

    def int8_dequantize(
        self, q: np.ndarray, scales: np.ndarray, block: int
    ) -> np.ndarray:
        """q * scale of its block, as float32."""
        qq = _check.array("q", q, _check.I8)
        b = _check.block_size(block)
        sc = _check.vector("scales", scales, _check.n_blocks(qq.shape[0], b))
        return self._int8_dq(qq, sc, b)
