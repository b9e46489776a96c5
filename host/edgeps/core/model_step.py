"""The model's parameters and how one update moves them.

Step sizes (lr, the worker-count scale, staleness, the divergence back-off),
the norm bound that clips an outsized update, differential privacy (each
applied update clipped and noised by a ``DPMechanism``, ``edgeps.core.privacy``,
before anything else sees it), and the two optimizers: the
PS's for gradients and the server optimizer for deltas and aggregates
(``edgeps.core.deltas``). The ``ParameterServer`` decides whose update is
applied and when; this module only applies it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from edgeps import kernels
from edgeps.core.args import check_params, check_positive, resolve_optimizer
from edgeps.core.defaults import JOB, worker_step_scale
from edgeps.core.deltas import push_delta
from edgeps.core.norm_guard import NormGuard
from edgeps.core.privacy import DPMechanism
from edgeps.core.types import Push
from edgeps.core.validate import clip_scale


class ModelStep:
    """Parameters, version and the step rules; see ``ParameterServer`` for each."""

    def __init__(
        self,
        params: np.ndarray,
        *,
        optimizer: str | kernels.Optimizer = "sgd",
        lr: float = JOB.lr,
        lr_workers: int = JOB.lr_workers,
        staleness_aware: bool = False,
        max_update_norm: float | None = None,
        norm_guard: NormGuard | None = None,
        server_opt: str | kernels.Optimizer = JOB.server_opt,
        server_lr: float = JOB.server_lr,
        dp: DPMechanism | None = None,
    ) -> None:
        check_params(params)
        self._params = np.array(params, dtype=np.float32, copy=True, order="C")
        self.optimizer = resolve_optimizer(optimizer, self._params.size)
        self.server_optimizer = resolve_optimizer(server_opt, self._params.size)
        self.lr = check_positive("lr", lr)
        self.server_lr = check_positive("server_lr", server_lr)
        if isinstance(lr_workers, bool) or not isinstance(lr_workers, int):
            raise TypeError(f"lr_workers must be an int, got {lr_workers!r}")
        if lr_workers < 0:
            raise ValueError(f"lr_workers must be >= 0, got {lr_workers}")
        self.lr_workers = lr_workers
        self.staleness_aware = bool(staleness_aware)
        if max_update_norm is not None:
            max_update_norm = check_positive("max_update_norm", max_update_norm)
        self.max_update_norm = max_update_norm
        self.norm_guard = norm_guard
        if not isinstance(dp, (DPMechanism, type(None))):
            raise TypeError(f"dp must be a DPMechanism, got {type(dp)!r}")
        self.dp = dp  # None: updates applied as sent, bit for bit
        if norm_guard is not None and norm_guard.prior is None:
            norm_guard.prior = max(1.0, kernels.l2_norm(self._params))
        self.step_backoff = 1.0  # cut by a DivergenceWatch when the job diverges
        self.version = 0
        self.clipped = 0  # updates applied scaled down to the norm bound
        self._shared: tuple[int, np.ndarray] | None = None  # see view()

    @property
    def n_params(self) -> int:
        return int(self._params.size)

    def snapshot(self) -> tuple[int, np.ndarray]:
        """(version, a copy of the parameters)."""
        return self.version, self._params.copy()

    def view(self) -> tuple[int, np.ndarray]:
        """(version, the parameters as a read-only array: one copy per version)."""
        shared = self._shared
        if shared is None or shared[0] != self.version:
            frozen = self._params.copy()
            frozen.flags.writeable = False
            shared = self._shared = (self.version, frozen)
        return shared

    def like_params(self) -> np.ndarray:
        """The parameters, read-only, for checks of their shape and type."""
        return self.view()[1]

    def restore(
        self,
        version: int,
        params: np.ndarray | None,
        optimizer_state: dict[str, Any] | None,
    ) -> None:
        """Put a checked checkpoint's version, parameters and optimizer state back."""
        if optimizer_state:
            self.optimizer.load_state_dict(optimizer_state)
        if params is not None:
            self._params[...] = params
        self.version, self._shared = int(version), None

    def adopt(self, params: np.ndarray) -> int:
        """New parameters from elsewhere (a site's central copy), as a new version."""
        values = np.asarray(params, dtype=np.float32).reshape(-1)
        if values.size != self.n_params:
            raise ValueError(f"{values.size} parameters, the model has {self.n_params}")
        self._params[...] = values
        self.version, self._shared = self.version + 1, None
        return self.version

    def _shared_scale(self, n_live: int) -> float:
        return self.step_backoff * worker_step_scale(self.lr_workers, n_live)

    def step_gradient(
        self, push: Push, staleness: int, n_live: int, weight: float
    ) -> bool:
        """Apply a gradient clipped to the norm bound; True if it was clipped.

        ``weight``: the policy's and the balancer's share of the step. Under
        differential privacy the gradient is first clipped to C and noised.
        """
        update = push.update
        if self.dp is not None:
            update = self.dp.apply(update, push.worker_id)
        scale = clip_scale(update, self.max_update_norm, self.norm_guard)
        lr = self.lr / (staleness + 1) if self.staleness_aware else self.lr
        lr *= self._shared_scale(n_live) * weight
        self.optimizer.step(self._params, update, lr * scale)
        self.version += 1
        if self.norm_guard is not None:
            self.norm_guard.accept(kernels.l2_norm(update) * scale)
        return self._count(scale < 1.0)

    def delta_of(self, push: Push) -> tuple[np.ndarray, bool]:
        """(the push's delta clipped to the norm bound, whether it was clipped).

        Under differential privacy the update as sent (a gradient or a delta)
        is first clipped to C and noised: what ``step_delta`` applies and
        what an aggregating policy collects (``step_aggregate``) is noisy.
        """
        if self.dp is not None:
            push = dataclasses.replace(
                push, update=self.dp.apply(push.update, push.worker_id)
            )
        delta, clipped = push_delta(
            push, self.lr, self.max_update_norm, self.norm_guard
        )
        self._count(clipped)
        return delta, clipped

    def step_delta(
        self, delta: np.ndarray, staleness: int, n_live: int, weight: float
    ) -> None:
        """Apply a (clipped) delta through the server optimizer."""
        lr = self.server_lr / (staleness + 1 if self.staleness_aware else 1)
        lr *= self._shared_scale(n_live) * weight
        self.server_optimizer.step(self._params, delta, lr)
        self.version += 1

    def step_aggregate(self, pseudo: np.ndarray) -> None:
        """Apply an aggregate a policy released, as one version."""
        lr = self.server_lr * self.step_backoff
        self.server_optimizer.step(self._params, pseudo, lr)
        self.version += 1

    def _count(self, clipped: bool) -> bool:
        if clipped:
            self.clipped += 1
        return clipped
