"""The Flower side's model for any job that is not an MLP: edgeps' own kernels.

Runs in Flower's own virtual environment, which does not install edgeps:
edgeps' kernel package (`edgeps.kernels`: numpy and cffi only, its built C
backend when there is one) is imported from this checkout's host/ directory,
so both sides compute the same gradient with the same code and the comparison
is of the systems, not of the kernels.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

HOST = Path(__file__).resolve().parents[3] / "host"


def _kernels() -> Any:
    if str(HOST) not in sys.path:
        sys.path.insert(0, str(HOST))
    try:
        from edgeps import kernels
    except ImportError as exc:
        raise ImportError(f"edgeps' kernels not importable from {HOST}: {exc}") from exc
    return kernels


class KernelModel:
    """A model spec (e.g. LeNet-5's conv2d:...) trained by edgeps' kernels."""

    def __init__(self, spec_text: str) -> None:
        self.kernels = _kernels()
        self.spec = self.kernels.ModelSpec.parse(spec_text)
        self.n_params = int(self.spec.n_params)
        self._grad = np.zeros(self.n_params, dtype=np.float32)

    @property
    def backend(self) -> str:
        """Which of edgeps' backends computes: "c" or "numpy"."""
        return str(self.kernels.backend_name())

    def accuracy(self, params: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
        p = np.ascontiguousarray(params, dtype=np.float32)
        yi = np.ascontiguousarray(y, dtype=np.int32)
        return float(self.kernels.accuracy(self.spec, p, X, yi))

    def loss_and_grad(
        self, params: np.ndarray, X: np.ndarray, y: np.ndarray
    ) -> tuple[float, np.ndarray]:
        """Mean loss and its gradient on a batch, as an edgeps worker's step."""
        p = np.ascontiguousarray(params, dtype=np.float32)
        Xb = np.ascontiguousarray(X, dtype=np.float32)
        yb = np.ascontiguousarray(y, dtype=np.int32)
        loss, g = self.kernels.loss_and_grad(self.spec, p, Xb, yb, grad_out=self._grad)
        return float(loss), np.array(g, dtype=np.float32, copy=True)
