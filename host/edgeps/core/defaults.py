"""The one set of job defaults: serve, simulate, emulate, the demo and every bench
that runs a job take their step, optimizer, batch, guard and evaluation from here.

A test (``tests/test_job_defaults.py``) fails when two commands would run the
same job differently.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobDefaults:
    """What a job runs with unless the user says otherwise.

    Parameters
    ----------
    lr : the step size of one push while at most ``lr_workers`` workers are live.
    lr_workers : above this many live workers each push steps by
        ``lr x lr_workers / live`` (see ``worker_step_scale``), so more workers
        never make a larger step per unit of time; 0 = the plain ``lr`` always.
    optimizer : the PS's optimizer: sgd, momentum or adam.
    batch : samples per step on every worker.
    staleness_aware : lr / (staleness + 1) for every push.
    norm_guard : refuse pushes above k x the median norm of the recent applied
        ones (``edgeps.core.norm_guard``); 0 = off.
    eval_interval : seconds between evaluations of the held-out data; a time
        to target is known to this precision.
    divergence_backoff : the factor the step is multiplied by each time the job
        is seen diverging (``edgeps.core.divergence``); 1.0 = never back off.
    local_steps : SGD steps a worker takes at ``lr`` between two pushes; 1 =
        push every gradient, H > 1 = push the model delta after H steps.
    local_epochs : when > 0, the local steps are this many passes over the
        worker's shard (ceil(epochs x shard / batch)) instead of ``local_steps``.
    local_time : when > 0, a worker takes local steps until this many seconds
        of compute have passed (at least one) instead of ``local_steps``.
    server_opt : the optimizer the PS applies deltas with (FedOpt, Reddi et
        al., ICLR 2021: a delta is a pseudo-gradient): sgd, momentum or adam.
    server_lr : the step the PS applies deltas with; 1.0 with sgd adds the
        delta as the worker computed it.
    dp : differential privacy (``edgeps.core.privacy``): off, central (the PS
        clips and noises each applied update) or local (each worker does).
    dp_clip : C, the L2 norm each update is clipped to.
    dp_noise : sigma, the noise multiplier: noise N(0, (sigma x C)^2).
    dp_delta : the delta that the spent epsilon is reported at.
    dp_epsilon_budget : stop the job once epsilon reaches this; 0 = no limit.
    """

    lr: float = 0.1
    lr_workers: int = 16
    optimizer: str = "sgd"
    batch: int = 32
    staleness_aware: bool = False
    norm_guard: float = 10.0
    eval_interval: float = 0.5
    divergence_backoff: float = 0.5
    local_steps: int = 1
    local_epochs: float = 0.0
    local_time: float = 0.0
    server_opt: str = "sgd"
    server_lr: float = 1.0
    dp: str = "off"
    dp_clip: float = 1.0
    dp_noise: float = 1.0
    dp_delta: float = 1e-5
    dp_epsilon_budget: float = 0.0


JOB = JobDefaults()


def worker_step_scale(lr_workers: int, n_live: int) -> float:
    """Share of ``lr`` one push gets with ``n_live`` live workers: min(1, R / N).

    With N workers pushing asynchronously a push lands about N versions stale,
    and a synchronous round applies N gradients of one version: either way the
    model moves about N steps per round of pushes. Scaling each by R / N past
    R workers keeps that movement what R workers would make.
    """
    if lr_workers <= 0 or n_live <= lr_workers:
        return 1.0
    return lr_workers / n_live
