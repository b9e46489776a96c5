"""Checks on a push that do not depend on the sync policy; each failure is a token."""

from __future__ import annotations

import math

import numpy as np

from edgeps import kernels
from edgeps.core.registry import WorkerRecord
from edgeps.core.types import Push


def identity_problem(rec: WorkerRecord | None, push: Push) -> str | None:
    """Who sent it and is it new? Problems here are not the worker's current turn."""
    if rec is None:
        return "unknown_worker"
    if not rec.live:
        return "dead_worker"
    inc = push.incarnation
    if isinstance(inc, bool) or not isinstance(inc, (int, np.integer)):
        return "bad_incarnation"
    if inc < rec.incarnation:
        return "stale_seq"  # a push from an earlier life of this worker
    if inc > rec.incarnation:
        return "unknown_incarnation"  # restarted but its hello has not arrived
    seq = push.seq
    if isinstance(seq, bool) or not isinstance(seq, (int, np.integer)) or seq < 0:
        return "bad_seq"
    if seq == rec.last_seq:
        return "duplicate"
    if seq < rec.last_seq:
        return "stale_seq"
    return None


def content_problem(
    rec: WorkerRecord, push: Push, version: int, n_params: int, max_norm: float | None
) -> str | None:
    """Is this (new) push from the worker's current turn usable?"""
    clock = push.clock
    if (
        isinstance(clock, bool)
        or not isinstance(clock, (int, np.integer))
        or clock < 1
        or clock <= rec.last_push_clock
    ):
        return "bad_clock"
    base = push.base_version
    if isinstance(base, bool) or not isinstance(base, (int, np.integer)):
        return "bad_version"
    if base < 0 or base > version:
        return "bad_version"
    u = push.update
    if (
        not isinstance(u, np.ndarray)
        or u.dtype != np.float32
        or u.ndim != 1
        or u.shape[0] != n_params
        or not u.flags.c_contiguous
    ):
        return "bad_shape"
    if not kernels.all_finite(u):
        return "non_finite"
    if max_norm is not None and kernels.l2_norm(u) > max_norm:
        return "norm"
    return None


def sane_time(x: object) -> float:
    """A reported duration, or 0 if the worker sent garbage (never raise on it)."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating)):
        return 0.0
    v = float(x)
    return v if math.isfinite(v) and v >= 0 else 0.0
