"""A simulated board's local round: how many SGD steps, how long, and the delta.

With ``local_steps`` H = 1 a board computes one gradient per release, as
before (the same random draws, the same push). With H > 1 (or a number of
local epochs, or a compute-time budget) it takes H plain SGD steps at the
job's lr on its own shard, each on the next minibatch, and pushes the
delta ``params_before - params_after`` with ``steps`` = H and the samples of
every step; its compute time is the sum of H draws of its profile, stretched
by the bursts of a competing process (``WorkerProfile.bursts``) from the
virtual time the round starts.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from edgeps import kernels
from edgeps.workloads.scenarios import WorkerProfile


def plan_steps(
    profile: WorkerProfile,
    rng: np.random.Generator,
    rows: int,
    shard: int,
    *,
    local_steps: int,
    local_epochs: float,
    local_time: float,
    start: float = 0.0,
) -> tuple[int, float]:
    """(steps, compute seconds) of one local round of ``rows`` per step.

    ``local_time`` > 0: steps until that much time has passed (at least
    one); else ``local_epochs`` > 0: ceil(epochs x shard / rows); else
    ``local_steps``. ``start`` is when the round starts (seconds since the
    job started), which places it against the profile's bursts.
    """
    if local_time > 0:
        steps, spent = 0, 0.0
        while spent < local_time:
            spent += profile.stretch(start + spent, profile.sample_compute(rng, rows))
            steps += 1
        return steps, spent
    if local_epochs > 0:
        steps = max(1, math.ceil(local_epochs * shard / max(1, rows)))
    else:
        steps = local_steps
    spent = sum(profile.sample_compute(rng, rows) for _ in range(steps))
    return steps, profile.stretch(start, float(spent))


def local_update(
    spec: kernels.ModelSpec,
    params: np.ndarray,
    draw: Callable[[], tuple[np.ndarray, np.ndarray]],
    steps: int,
    lr: float,
) -> tuple[float, np.ndarray, int]:
    """(loss, update, samples): a gradient for one step, else H steps' delta.

    The loss is the mean over the steps, each taken before its own step.
    """
    X, y = draw()
    loss, grad = kernels.loss_and_grad(spec, params, X, y)
    if steps <= 1:
        return float(loss), grad, len(y)
    local = params.astype(np.float32, copy=True)
    step = np.float32(lr)
    local -= step * grad
    losses, samples = [float(loss)], len(y)
    for _ in range(steps - 1):
        X, y = draw()
        loss, grad = kernels.loss_and_grad(spec, local, X, y)
        local -= step * grad
        losses.append(float(loss))
        samples += len(y)
    return float(np.mean(losses)), params - local, samples
