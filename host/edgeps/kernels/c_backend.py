"""The C backend: the `edgeps._native` cffi extension behind the Kernels API.

Per-call overhead is what matters at edge batch sizes, so each model spec
gets a cached plan (the C model struct, or the layer list of a conv model,
and a scratch buffer, per thread because cffi releases the GIL during calls)
and every call is one C call.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from edgeps.kernels import _check
from edgeps.kernels.base import Kernels
from edgeps.kernels.spec import ModelSpec

try:
    from edgeps._native import ffi, lib
except ImportError as exc:  # pragma: no cover - exercised by the fallback path
    raise ImportError(f"edgeps._native is not built: {exc}") from exc

_NEEDED = (
    "eps_model_loss_grad",
    "eps_net_loss_grad",
    "eps_int8_quantize",
    "eps_build_info",
    "EpsMlp",
)
for _name in _NEEDED:
    if not hasattr(lib, _name):
        raise ImportError(f"edgeps._native is stale (no {_name}); rebuild it")
# the C enums, as the cdef generated from the headers declares them
_KIND = {
    "linear": lib.EpsLinear,
    "logistic": lib.EpsLogistic,
    "softmax": lib.EpsSoftmax,
    "mlp": lib.EpsMlp,
}
_ACT = {"relu": lib.EpsRelu, "tanh": lib.EpsTanh}
_OP = {
    "conv": lib.EpsOpConv,
    "maxpool": lib.EpsOpMaxPool,
    "avgpool": lib.EpsOpAvgPool,
    "dense": lib.EpsOpDense,
}


def _status(code: int, what: str) -> None:
    if code != lib.EpsOk:
        msg = ffi.string(lib.eps_status_str(code)).decode()
        raise ValueError(f"{what}: {msg}")


def _f32(a: np.ndarray) -> Any:
    return ffi.from_buffer("float[]", a)


_MAX_LAYERS = len(ffi.new("EpsNet *").layers)


def net_struct(spec: ModelSpec) -> Any:
    """The C `EpsNet` of a conv spec (a new cffi struct)."""
    ops = spec.ops
    if len(ops) > _MAX_LAYERS:
        raise ValueError(f"model {spec} has more layers than the C kernels take")
    net = ffi.new("EpsNet *")
    net.dims = len(spec.in_shape) - 1
    for i, v in enumerate(spec.in_shape):
        net.in_shape[i] = v
    net.n_layers = len(ops)
    for i, op in enumerate(ops):
        ly, c = op.layer, net.layers[i]
        c.op = _OP[ly.op]
        c.n_out = ly.n_out
        c.k, c.stride, c.pad = ly.k, ly.stride, ly.pad
        c.relu = int(ly.relu and ly.op in ("conv", "dense"))
    return net


class _Plan:
    """C model (or net) struct, scratch for any batch, last params/grad pointers.

    Training loops pass the same params and gradient arrays on every step, so
    their cffi buffers are kept (the plan is per thread, so nothing races).
    """

    __slots__ = (
        "model",
        "net",
        "scratch",
        "scratch_len",
        "loss",
        "n_params",
        "n_features",
        "y_dtype",
        "labels",
        "p_arr",
        "p_buf",
        "g_arr",
        "g_buf",
    )

    def __init__(self, spec: ModelSpec) -> None:
        self.n_params = spec.n_params
        self.n_features = spec.n_features
        self.labels = spec.kind != "linear"
        self.y_dtype = _check.I32 if self.labels else _check.F32
        self.p_arr: np.ndarray | None = None
        self.g_arr: np.ndarray | None = None
        self.p_buf: Any = None
        self.g_buf: Any = None
        self.model: Any = ffi.NULL
        self.net: Any = None
        self.loss = ffi.new("float *")
        if spec.is_conv:
            self._init_net(spec)
        else:
            self._init_model(spec)

    def _init_model(self, spec: ModelSpec) -> None:
        m = ffi.new("EpsModel *")
        m.kind = _KIND[spec.kind]
        m.n_features = spec.n_features
        m.n_classes = spec.n_classes
        m.n_hidden = len(spec.hidden)
        for i, h in enumerate(spec.hidden):
            m.hidden[i] = h
        m.activation = _ACT[spec.activation]
        if lib.eps_model_n_params(m) != spec.n_params:
            raise ValueError(f"C and Python disagree on the size of {spec}")
        # scratch depends on the batch only up to the chunk size, so the
        # largest chunk's worth serves every batch
        self.scratch_len = lib.eps_model_scratch_length(m, 1 << 20)
        if self.scratch_len < 0:
            raise ValueError(f"model {spec} is too large for the C kernels")
        self.scratch = ffi.new("float[]", max(self.scratch_len, 1))
        _status(
            lib.eps_model_check(m, spec.n_params, self.scratch_len, 1 << 20),
            f"C kernels refuse model {spec}",
        )
        self.model = m

    def _init_net(self, spec: ModelSpec) -> None:
        net = net_struct(spec)
        if lib.eps_net_n_params(net) != spec.n_params:
            raise ValueError(f"C and Python disagree on the size of {spec}")
        self.scratch_len = lib.eps_net_scratch_length(net, 1 << 20)
        if self.scratch_len < 0:
            raise ValueError(f"model {spec} is too large for the C kernels")
        self.scratch = ffi.new("float[]", max(self.scratch_len, 1))
        _status(
            lib.eps_net_check(net, spec.n_params, self.scratch_len, 1 << 20),
            f"C kernels refuse model {spec}",
        )
        self.net = net


class CKernels(Kernels):
    """cffi calls into the native C99 kernels."""

    name = "c"

    def __init__(self) -> None:
        self._tls = threading.local()

    def _plan(self, s: ModelSpec) -> _Plan:
        try:
            plans: dict[ModelSpec, _Plan] = self._tls.plans
        except AttributeError:
            plans = self._tls.plans = {}
        plan = plans.get(s)
        if plan is None:
            plan = plans[s] = _Plan(s)
        return plan

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
        # fast path: inline checks for the common, valid call; anything unusual
        # goes through the shared checks, which raise the precise error
        try:
            plan: _Plan | None = self._tls.plans.get(spec)
        except (AttributeError, TypeError):
            plan = None
        if (
            plan is None
            or type(params) is not np.ndarray
            or type(X) is not np.ndarray
            or type(y) is not np.ndarray
            or params.dtype is not _check.F32
            or X.dtype is not _check.F32
            or y.dtype is not plan.y_dtype
            or params.shape != (plan.n_params,)
            or X.ndim != 2
            or X.shape[1] != plan.n_features
            or X.shape[0] == 0
            or y.shape != (X.shape[0],)
            or not (params.flags.c_contiguous and X.flags.c_contiguous)
            or not y.flags.c_contiguous
        ):
            return super().loss_and_grad(spec, params, X, y, grad_out)
        if grad_out is None:
            g = np.empty(plan.n_params, np.float32)
            g_buf = _f32(g)
        elif grad_out is plan.g_arr:
            g, g_buf = grad_out, plan.g_buf
        else:
            g = _check.grad_buffer(spec, grad_out)
            g_buf = plan.g_buf = _f32(g)
            plan.g_arr = g
        if params is plan.p_arr:
            p_buf = plan.p_buf
        else:
            p_buf = plan.p_buf = _f32(params)
            plan.p_arr = params
        if plan.labels:
            labels, targets = ffi.from_buffer("int32_t[]", y), ffi.NULL
        else:
            labels, targets = ffi.NULL, _f32(y)
        if plan.net is not None:
            code = lib.eps_net_loss_grad(
                plan.net,
                p_buf,
                _f32(X),
                X.shape[0],
                labels,
                g_buf,
                plan.scratch,
                plan.loss,
            )
        else:
            code = lib.eps_model_loss_grad(
                plan.model,
                p_buf,
                _f32(X),
                X.shape[0],
                labels,
                targets,
                g_buf,
                plan.scratch,
                plan.loss,
            )
        if code != lib.EpsOk:
            raise _check.bad_labels(spec, y)
        return float(plan.loss[0]), g

    def _loss_grad(
        self, s: ModelSpec, p: np.ndarray, X: np.ndarray, y: np.ndarray, g: np.ndarray
    ) -> float:
        plan = self._plan(s)
        if plan.net is not None:
            code = lib.eps_net_loss_grad(
                plan.net,
                _f32(p),
                _f32(X),
                X.shape[0],
                ffi.from_buffer("int32_t[]", y),
                _f32(g),
                plan.scratch,
                plan.loss,
            )
            if code != lib.EpsOk:
                raise _check.bad_labels(s, y)
            return float(plan.loss[0])
        if s.kind == "linear":
            labels, targets = ffi.NULL, _f32(y)
        else:
            labels, targets = ffi.from_buffer("int32_t[]", y), ffi.NULL
        code = lib.eps_model_loss_grad(
            plan.model,
            _f32(p),
            _f32(X),
            X.shape[0],
            labels,
            targets,
            _f32(g),
            plan.scratch,
            plan.loss,
        )
        if code != lib.EpsOk:
            raise _check.bad_labels(s, y)
        return float(plan.loss[0])

    def _forward(self, s: ModelSpec, p: np.ndarray, X: np.ndarray) -> np.ndarray:
        plan = self._plan(s)
        B = X.shape[0]
        if plan.net is not None:
            out = np.empty((B, s.n_classes), np.float32)
            lib.eps_net_forward(plan.net, _f32(p), _f32(X), B, _f32(out), plan.scratch)
            return out
        out = np.empty(B if s.n_classes == 1 else (B, s.n_classes), np.float32)
        lib.eps_model_forward(plan.model, _f32(p), _f32(X), B, _f32(out), plan.scratch)
        return out

    # ---- optimizers ----
    def _sgd(self, p: np.ndarray, g: np.ndarray, lr: float) -> None:
        lib.eps_sgd_step(_f32(p), _f32(g), p.shape[0], lr)

    def _momentum(
        self, p: np.ndarray, g: np.ndarray, v: np.ndarray, lr: float, mu: float
    ) -> None:
        lib.eps_momentum_step(_f32(p), _f32(g), _f32(v), p.shape[0], lr, mu)

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
        if t > 2**31 - 1:
            raise ValueError(f"step count {t} is out of range")
        lib.eps_adam_step(
            _f32(p), _f32(g), _f32(m), _f32(v), p.shape[0], t, lr, b1, b2, eps
        )

    # ---- update helpers ----
    def _l2_norm(self, x: np.ndarray) -> float:
        return float(lib.eps_l2_norm(_f32(x), x.shape[0]))

    def _scale(self, x: np.ndarray, scale: float) -> None:
        lib.eps_scale(_f32(x), x.shape[0], scale)

    def _all_finite(self, x: np.ndarray) -> bool:
        return bool(lib.eps_all_finite(_f32(x), x.shape[0]))

    def _fp16_q(self, x: np.ndarray, r: np.ndarray | None) -> np.ndarray:
        out = np.empty(x.shape[0], np.uint16)
        res = ffi.NULL if r is None else _f32(r)
        lib.eps_fp16_quantize(
            _f32(x), res, ffi.from_buffer("uint16_t[]", out), x.shape[0]
        )
        return out

    def _fp16_dq(self, q: np.ndarray) -> np.ndarray:
        out = np.empty(q.shape[0], np.float32)
        lib.eps_fp16_dequantize(ffi.from_buffer("uint16_t[]", q), _f32(out), q.shape[0])
        return out

    def _int8_q(
        self, x: np.ndarray, block: int, r: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        n = x.shape[0]
        q = np.empty(n, np.int8)
        scales = np.empty(_check.n_blocks(n, block), np.float32)
        res = ffi.NULL if r is None else _f32(r)
        code = lib.eps_int8_quantize(
            _f32(x), res, ffi.from_buffer("int8_t[]", q), _f32(scales), n, block
        )
        if code != lib.EpsOk:
            raise ValueError("int8_quantize: input holds NaN or Inf")
        return q, scales

    def _int8_dq(self, q: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
        n = q.shape[0]
        out = np.empty(n, np.float32)
        lib.eps_int8_dequantize(
            ffi.from_buffer("int8_t[]", q), _f32(scales), _f32(out), n, block
        )
        return out
