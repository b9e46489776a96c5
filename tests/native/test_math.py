"""The libm-free exp/log/tanh approximations in native/eps_math.h against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps._native import ffi, lib  # type: ignore[attr-defined]

EXP, LOG, TANH, LOG1P = 0, 1, 2, 3
ULP = float(np.finfo(np.float32).eps)


def apply(op: int, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    lib.eps_math_apply(
        op, ffi.from_buffer("float[]", x), ffi.from_buffer("float[]", out), x.size
    )
    return out


def max_rel_err(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - want) / np.abs(want)))


def test_exp_relative_error_over_the_normal_range() -> None:
    # Prepare: every result that is a normal float, densely sampled
    x = np.linspace(-87.0, 88.5, 2_000_001, dtype=np.float32)
    # Execute
    got = apply(EXP, x)
    # Assert
    assert max_rel_err(got, np.exp(x.astype(np.float64))) < 2 * ULP


def test_exp_edges() -> None:
    x = np.array(
        [0.0, -0.0, 89.0, 1e30, np.inf, -104.0, -1e30, -np.inf, -95.0], np.float32
    )
    got = apply(EXP, x)
    assert got[0] == 1.0 and got[1] == 1.0
    assert np.isposinf(got[2:5]).all()
    assert (got[5:8] == 0.0).all()
    # subnormal results keep their magnitude
    assert got[8] == pytest.approx(np.exp(-95.0), rel=1e-3)
    assert np.isnan(apply(EXP, np.array([np.nan], np.float32)))[0]


def test_log_relative_error_and_edges() -> None:
    # Prepare: log-spaced over the whole positive float range, away from x = 1
    x = np.logspace(-44, 38, 2_000_001, dtype=np.float64).astype(np.float32)
    x = x[(x < 0.99) | (x > 1.01)]
    # Execute
    got = apply(LOG, x)
    # Assert
    assert max_rel_err(got, np.log(x.astype(np.float64))) < 2 * ULP
    near = np.linspace(0.5, 2.0, 100_001, dtype=np.float32)
    err = np.abs(apply(LOG, near) - np.log(near.astype(np.float64)))
    assert err.max() < 2 * ULP
    edges = apply(LOG, np.array([0.0, -1.0, np.inf, np.nan, 1.0], np.float32))
    assert np.isneginf(edges[0]) and np.isnan(edges[1]) and np.isposinf(edges[2])
    assert np.isnan(edges[3]) and edges[4] == 0.0


def test_log1p_is_accurate_for_tiny_arguments() -> None:
    x = np.logspace(-30, 0, 200_001, dtype=np.float64).astype(np.float32)
    got = apply(LOG1P, x)
    assert max_rel_err(got, np.log1p(x.astype(np.float64))) < 3 * ULP


def test_tanh_error_over_a_wide_range() -> None:
    # Prepare
    x = np.linspace(-20.0, 20.0, 2_000_001, dtype=np.float32)
    x = x[x != 0]
    # Execute
    got = apply(TANH, x)
    # Assert: relative error small everywhere, odd symmetry exact
    assert max_rel_err(got, np.tanh(x.astype(np.float64))) < 3 * ULP
    np.testing.assert_array_equal(apply(TANH, -x), -got)
    tiny = np.array([1e-30, -1e-20, 0.0], np.float32)
    np.testing.assert_array_equal(apply(TANH, tiny), tiny)


def test_status_strings_and_build_info() -> None:
    assert ffi.string(lib.eps_status_str(lib.EpsOk)) == b"ok"
    assert ffi.string(lib.eps_status_str(99)) == b"unknown status"
    info = ffi.string(lib.eps_build_info()).decode()
    assert "flags=-O3 -std=c99" in info and "-ffast-math" not in info
