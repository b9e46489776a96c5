"""Gradient, optimizer and quantization kernels with a C (cffi) and a numpy backend.

The active backend is chosen once at import: C if the ``edgeps._native``
extension loads, numpy if it does not or if ``EDGEPS_KERNELS=numpy``.
``get_backend(name)`` returns either one explicitly (tests compare them).
"""

from __future__ import annotations

import os

import numpy as np

from edgeps.kernels.base import Kernels
from edgeps.kernels.numpy_backend import NumpyKernels
from edgeps.kernels.optim import Optimizer
from edgeps.kernels.optim import make_optimizer as _make_optimizer
from edgeps.kernels.spec import ModelSpec

__all__ = [
    "Kernels",
    "ModelSpec",
    "Optimizer",
    "accuracy",
    "adam_step",
    "all_finite",
    "backend_name",
    "backend_reason",
    "clip_norm_",
    "forward",
    "fp16_dequantize",
    "fp16_quantize",
    "get_backend",
    "int8_dequantize",
    "int8_quantize",
    "l2_norm",
    "loss_and_grad",
    "make_optimizer",
    "momentum_step",
    "predict",
    "sgd_step",
]

_BACKENDS: dict[str, Kernels] = {}


def _load_c() -> Kernels:
    from edgeps.kernels.c_backend import CKernels

    return CKernels()


def get_backend(name: str) -> Kernels:
    """The "c" or "numpy" backend; ImportError if the C extension cannot load."""
    if name not in ("c", "numpy"):
        raise ValueError(f"backend must be 'c' or 'numpy', got {name!r}")
    if name not in _BACKENDS:
        _BACKENDS[name] = _load_c() if name == "c" else NumpyKernels()
    return _BACKENDS[name]


def _choose() -> tuple[Kernels, str]:
    forced = os.environ.get("EDGEPS_KERNELS", "").strip().lower()
    if forced == "numpy":
        return get_backend("numpy"), "EDGEPS_KERNELS=numpy forces the numpy reference"
    try:
        k = get_backend("c")
    except (ImportError, OSError, AttributeError) as exc:
        reason = f"C extension edgeps._native unavailable ({exc}); using numpy"
        return get_backend("numpy"), reason
    if forced not in ("", "c"):
        return k, f"ignored EDGEPS_KERNELS={forced!r} (expected c or numpy); C loaded"
    return k, "C extension edgeps._native loaded"


_ACTIVE, _REASON = _choose()


def backend_name() -> str:
    """'c' or 'numpy': which backend the module-level functions use."""
    return _ACTIVE.name


def backend_reason() -> str:
    """Why that backend is active (forced by env, or why C failed to load)."""
    return _REASON


def make_optimizer(name: str, n_params: int, **hyper: float) -> Optimizer:
    """An optimizer ("sgd" | "momentum" | "adam") on the active backend."""
    return _make_optimizer(_ACTIVE, name, n_params, **hyper)


# bound methods of the active backend: no extra call layer on the hot path
loss_and_grad = _ACTIVE.loss_and_grad
forward = _ACTIVE.forward
predict = _ACTIVE.predict
accuracy = _ACTIVE.accuracy
sgd_step = _ACTIVE.sgd_step
momentum_step = _ACTIVE.momentum_step
adam_step = _ACTIVE.adam_step
l2_norm = _ACTIVE.l2_norm
clip_norm_ = _ACTIVE.clip_norm_
all_finite = _ACTIVE.all_finite
fp16_quantize = _ACTIVE.fp16_quantize
fp16_dequantize = _ACTIVE.fp16_dequantize
int8_quantize = _ACTIVE.int8_quantize
int8_dequantize = _ACTIVE.int8_dequantize

_ = np  # numpy is imported first so a broken numpy fails here, not mid-call
