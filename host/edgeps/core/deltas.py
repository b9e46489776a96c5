"""A push as a delta: what the PS applies when workers train between messages.

A push of H > 1 local steps carries ``params_before - params_after`` (the
worker's local SGD at the job's lr); the PS applies it as a pseudo-gradient
through its server optimizer at the server lr (FedOpt: Reddi et al.,
"Adaptive Federated Optimization", ICLR 2021), so sgd at 1.0 reproduces the
local training. A gradient (H <= 1) that an aggregating policy collects is
first made the delta of one local step, lr x gradient, so every update a
policy sees is in the same units.
"""

from __future__ import annotations

import numpy as np

from edgeps import kernels
from edgeps.core.norm_guard import NormGuard
from edgeps.core.types import Push
from edgeps.core.validate import clip_scale


def push_delta(
    push: Push,
    lr: float,
    max_update_norm: float | None,
    norm_guard: NormGuard | None,
) -> tuple[np.ndarray, bool]:
    """(the push's delta clipped to the norm bound, whether it was clipped).

    The norm guard is fed the delta's applied norm, as ``_step`` feeds it a
    gradient's. The returned array may be the push's own: never write to it.
    """
    delta = push.update
    if int(push.steps) <= 1:
        delta = delta * np.float32(lr)
    scale = clip_scale(delta, max_update_norm, norm_guard)
    if scale < 1.0:
        delta = delta * np.float32(scale)
    if norm_guard is not None:
        norm_guard.accept(kernels.l2_norm(delta))
    return delta, scale < 1.0
