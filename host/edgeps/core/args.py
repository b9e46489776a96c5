"""Checks on arguments of the core's public entry points (caller mistakes raise)."""

from __future__ import annotations

import math

import numpy as np

from edgeps import kernels


def check_now(now: object) -> float:
    """``now`` must be a finite number of seconds."""
    if isinstance(now, bool) or not isinstance(now, (int, float, np.floating)):
        raise TypeError(f"now must be a number of seconds, got {type(now).__name__}")
    if not math.isfinite(float(now)):
        raise ValueError(f"now must be finite, got {now!r}")
    return float(now)


def check_worker_id(worker_id: object) -> str:
    if not isinstance(worker_id, str):
        raise TypeError(f"worker_id must be a str, got {type(worker_id).__name__}")
    if not worker_id:
        raise ValueError("worker_id must not be empty")
    return worker_id


def check_int(name: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_params(params: object, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """A finite flat float32 vector (of ``shape`` if given)."""
    if not isinstance(params, np.ndarray):
        raise TypeError(f"params must be a numpy array, got {type(params).__name__}")
    if params.dtype != np.float32 or params.ndim != 1 or params.size == 0:
        raise ValueError(
            "params must be a non-empty flat float32 vector, got "
            f"dtype {params.dtype} shape {params.shape}"
        )
    if shape is not None and params.shape != shape:
        raise ValueError(f"params must have shape {shape}, got {params.shape}")
    if not kernels.all_finite(np.ascontiguousarray(params)):
        raise ValueError("params contain NaN or inf")
    return params


def check_positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def resolve_optimizer(optimizer: object, n_params: int) -> kernels.Optimizer:
    """An optimizer by name, or a given one checked to fit ``n_params``."""
    if isinstance(optimizer, str):
        return kernels.make_optimizer(optimizer, n_params)
    if isinstance(optimizer, kernels.Optimizer):
        if optimizer.n_params != n_params:
            raise ValueError(
                f"optimizer is for {optimizer.n_params} params, not {n_params}"
            )
        return optimizer
    raise TypeError("optimizer must be a name or an edgeps.kernels Optimizer")
