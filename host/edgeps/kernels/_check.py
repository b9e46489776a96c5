"""Argument checks shared by both backends, so both reject the same bad inputs."""

from __future__ import annotations

import math

import numpy as np

from edgeps.kernels.spec import ModelSpec

F32 = np.dtype(np.float32)
I32 = np.dtype(np.int32)
I8 = np.dtype(np.int8)
U16 = np.dtype(np.uint16)


def array(name: str, a: object, dtype: np.dtype, ndim: int = 1) -> np.ndarray:
    """Return ``a`` if it is a C-contiguous ndarray of this dtype and rank."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"{name} must have dtype {dtype}, got {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}")
    if not a.flags.c_contiguous:
        raise ValueError(f"{name} must be C-contiguous")
    return a


def writable(name: str, a: np.ndarray) -> np.ndarray:
    if not a.flags.writeable:
        raise ValueError(f"{name} must be writable (it is updated in place)")
    return a


# the C kernels index with int32
MAX_LENGTH = 2**31 - 1


def vector(name: str, a: object, length: int | None = None) -> np.ndarray:
    """A flat float32 C-contiguous vector, optionally of a given length."""
    v = array(name, a, F32)
    if v.shape[0] > MAX_LENGTH:
        raise ValueError(f"{name} is too long for the kernels ({v.shape[0]})")
    if length is not None and v.shape[0] != length:
        raise ValueError(f"{name} has length {v.shape[0]}, expected {length}")
    return v


def same_length(name: str, a: object, ref: np.ndarray) -> np.ndarray:
    v = writable(name, vector(name, a, ref.shape[0]))
    return v


def spec(s: object) -> ModelSpec:
    if not isinstance(s, ModelSpec):
        raise TypeError(f"spec must be a ModelSpec, got {type(s).__name__}")
    return s


def batch(s: ModelSpec, params: object, X: object) -> tuple[np.ndarray, np.ndarray]:
    """Check params and X against the spec; return them."""
    p = vector("params", params, s.n_params)
    x = array("X", X, F32, 2)
    if x.shape[1] != s.n_features:
        raise ValueError(
            f"X has {x.shape[1]} features, spec {s} expects {s.n_features}"
        )
    if x.shape[0] == 0:
        raise ValueError("X is an empty batch")
    return p, x


def targets(s: ModelSpec, y: object, n: int) -> np.ndarray:
    """Float32 targets for linear, int32 class ids otherwise (range: backends)."""
    want = F32 if s.kind == "linear" else I32
    t = array("y", y, want)
    if t.shape[0] != n:
        raise ValueError(f"y has length {t.shape[0]}, X has {n} rows")
    return t


def bad_labels(s: ModelSpec, y: np.ndarray) -> ValueError:
    n = 2 if s.kind == "logistic" else s.n_classes
    lo, hi = int(y.min()), int(y.max())
    return ValueError(f"y holds class ids in [{lo}, {hi}], expected [0, {n - 1}]")


def grad_buffer(s: ModelSpec, grad_out: object) -> np.ndarray:
    if grad_out is None:
        return np.empty(s.n_params, dtype=np.float32)
    return writable("grad_out", vector("grad_out", grad_out, s.n_params))


def scalar(name: str, value: object, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    f = float(value)
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite, got {f}")
    if positive and f <= 0:
        raise ValueError(f"{name} must be > 0, got {f}")
    return f


def unit(name: str, value: object) -> float:
    f = scalar(name, value)
    if not 0.0 <= f < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {f}")
    return f


def step_count(t: object) -> int:
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
        raise TypeError(f"t must be an int, got {type(t).__name__}")
    if int(t) < 1:
        raise ValueError(f"t counts steps from 1, got {t}")
    return int(t)


def block_size(block: object) -> int:
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)):
        raise TypeError(f"block must be an int, got {type(block).__name__}")
    if not 1 <= int(block) <= 1 << 20:
        raise ValueError(f"block must be in [1, {1 << 20}], got {block}")
    return int(block)


def n_blocks(n: int, block: int) -> int:
    return (n + block - 1) // block
