"""Optimizer objects that own their state buffers, for the PS and the workers."""

from __future__ import annotations

from typing import Any

import numpy as np

from edgeps.kernels import _check
from edgeps.kernels.base import Kernels


class Optimizer:
    """Applies ``params -= f(grad)`` in place; state lives in float32 buffers."""

    name = "abstract"
    _hyper_names: tuple[str, ...] = ()

    def __init__(self, kernels: Kernels, n_params: int) -> None:
        if isinstance(n_params, bool) or not isinstance(n_params, (int, np.integer)):
            raise TypeError("n_params must be an int")
        if n_params < 1:
            raise ValueError(f"n_params must be >= 1, got {n_params}")
        self.kernels = kernels
        self.n_params = int(n_params)
        self.t = 0
        self._buffers: dict[str, np.ndarray] = {}

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float) -> None:
        raise NotImplementedError

    def hyper(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in self._hyper_names}

    def state_dict(self) -> dict[str, Any]:
        """A copy of everything needed to resume: name, step count, hyper, buffers."""
        return {
            "name": self.name,
            "n_params": self.n_params,
            "t": self.t,
            "hyper": self.hyper(),
            "buffers": {k: v.copy() for k, v in self._buffers.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from ``state_dict()`` output; checks name, sizes and dtypes."""
        if not isinstance(state, dict):
            raise TypeError("state must be a dict from state_dict()")
        if state.get("name") != self.name:
            raise ValueError(f"state is for {state.get('name')!r}, not {self.name!r}")
        if state.get("n_params") != self.n_params:
            raise ValueError(
                f"state has n_params {state.get('n_params')}, expected {self.n_params}"
            )
        t = state.get("t")
        if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0:
            raise ValueError(f"state has a bad step count {t!r}")
        buffers = state.get("buffers")
        if not isinstance(buffers, dict) or set(buffers) != set(self._buffers):
            raise ValueError(f"state must hold buffers {sorted(self._buffers)}")
        for k, arr in buffers.items():
            _check.vector(f"buffers[{k!r}]", arr, self.n_params)
        for k, arr in buffers.items():
            self._buffers[k][...] = arr
        self.t = int(t)


class SGD(Optimizer):
    name = "sgd"

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float) -> None:
        self.kernels.sgd_step(params, grad, lr)
        self.t += 1


class Momentum(Optimizer):
    name = "momentum"
    _hyper_names = ("momentum",)

    def __init__(self, kernels: Kernels, n_params: int, momentum: float = 0.9) -> None:
        super().__init__(kernels, n_params)
        self.momentum = _check.unit("momentum", momentum)
        self._buffers["velocity"] = np.zeros(self.n_params, dtype=np.float32)

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float) -> None:
        v = self._buffers["velocity"]
        self.kernels.momentum_step(params, grad, v, lr, self.momentum)
        self.t += 1


class Adam(Optimizer):
    name = "adam"
    _hyper_names = ("beta1", "beta2", "eps")

    def __init__(
        self,
        kernels: Kernels,
        n_params: int,
        beta1: float = 0.9,
        beta2: float = 0.999,
        eps: float = 1e-8,
    ) -> None:
        super().__init__(kernels, n_params)
        self.beta1 = _check.unit("beta1", beta1)
        self.beta2 = _check.unit("beta2", beta2)
        self.eps = _check.scalar("eps", eps, positive=True)
        self._buffers["m"] = np.zeros(self.n_params, dtype=np.float32)
        self._buffers["v"] = np.zeros(self.n_params, dtype=np.float32)

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float) -> None:
        b = self._buffers
        t = self.t + 1
        self.kernels.adam_step(
            params, grad, b["m"], b["v"], t, lr, self.beta1, self.beta2, self.eps
        )
        self.t = t


OPTIMIZERS: dict[str, type[Optimizer]] = {
    "sgd": SGD,
    "momentum": Momentum,
    "adam": Adam,
}


def make_optimizer(
    kernels: Kernels, name: str, n_params: int, **hyper: float
) -> Optimizer:
    """Build an optimizer by name ("sgd" | "momentum" | "adam")."""
    cls = OPTIMIZERS.get(name)
    if cls is None:
        choices = sorted(OPTIMIZERS)
        raise ValueError(f"unknown optimizer {name!r}; choose from {choices}")
    try:
        return cls(kernels, n_params, **hyper)
    except TypeError as exc:
        raise TypeError(f"bad hyperparameters for {name}: {exc}") from None
