"""Checks on a push that do not depend on the sync policy; each failure is a token.

The push's fields are typed (ingest decoded and range-checked them); what is
checked here is the push against the PS's state: who sent it, is it new, is it
from the worker's current turn, does its update fit the parameters.
"""

from __future__ import annotations

import zlib

import numpy as np

from edgeps import kernels
from edgeps.core.norm_guard import NormGuard
from edgeps.core.registry import WorkerRecord
from edgeps.core.types import Push

SEQ_WINDOW = 64  # a push may run at most this far ahead of the last applied


def update_digest(push: Push) -> int:
    """CRC-32 of a push's update bytes: tells a redelivery from another push."""
    try:
        return zlib.crc32(np.ascontiguousarray(push.update).tobytes())
    except (TypeError, ValueError):
        return zlib.crc32(repr(push.update).encode())


def identity_problem(rec: WorkerRecord | None, push: Push) -> str | None:
    """Who sent it and is it new? Problems here are not the worker's current turn."""
    if rec is None:
        return "unknown_worker"
    if not rec.live and not rec.joining:
        return "dead_worker"
    if push.session != rec.session:
        return "stale_session"  # an earlier session's push, or a made-up one
    # the window runs from the last push decided, applied or refused, so a run
    # of refused pushes never locks the worker out
    latest = max(rec.last_seq, rec.refused[0])
    if push.seq < 0 or push.seq > latest + SEQ_WINDOW:
        return "bad_seq"
    if push.seq == rec.last_seq:
        return "duplicate"
    if push.seq == rec.refused[0] and update_digest(push) == rec.refused[1]:
        return "duplicate"  # a redelivery of the push just refused
    if push.seq < latest:
        return "stale_seq"  # older than a push already decided: a redelivery
    return None


def content_problem(
    rec: WorkerRecord, push: Push, version: int, n_params: int
) -> str | None:
    """Is this (new) push from the worker's current turn usable at all?

    An outsized one is: ``clip_scale`` bounds its influence instead.
    """
    if push.clock < 1 or push.clock <= rec.last_push_clock:
        return "bad_clock"
    if push.base_version < 0 or push.base_version > version:
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
    return None


def clip_scale(
    update: np.ndarray, max_norm: float | None, guard: NormGuard | None
) -> float:
    """The factor (<= 1) that brings a usable update within the norm bounds."""
    if max_norm is None and guard is None:
        return 1.0
    norm = kernels.l2_norm(update)
    scale = 1.0
    if max_norm is not None and norm > max_norm:
        scale = max_norm / norm
    if guard is not None:
        scale = min(scale, guard.clip_scale(norm))
    return scale
