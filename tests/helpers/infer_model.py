"""A small model trained on the host in a second, for the inference tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from edgeps.kernels import ModelSpec, get_backend, make_optimizer
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.scaler import Scaler
from edgeps.runtime.checkpoint import Checkpoint, save_checkpoint
from edgeps.workloads.datasets import load_dataset


def train(
    spec_text: str, dataset: str, steps: int = 300, seed: int = 0
) -> tuple[TrainedModel, np.ndarray, np.ndarray]:
    """A model fitted by full-batch Adam on the raw features (scaled by its
    scaler); the held-out raw rows and labels."""
    ds = load_dataset(dataset, seed)
    rng = np.random.default_rng(seed)
    # raw features as a sensor would give them: shifted and stretched
    shift = rng.normal(scale=5.0, size=ds.X_train.shape[1])
    stretch = rng.uniform(0.5, 20.0, size=ds.X_train.shape[1])
    raw_train = ds.X_train * stretch + shift
    raw_test = (ds.X_test * stretch + shift).astype(np.float32)
    spec = ModelSpec.parse(spec_text)
    scaler = Scaler.fit(raw_train)
    X = scaler.transform(raw_train)
    params = spec.init_params(seed)
    opt = make_optimizer("adam", spec.n_params)
    np_k = get_backend("numpy")
    y = ds.y_train
    for _ in range(steps):
        _, g = np_k.loss_and_grad(spec, params, X, y)
        opt.step(params, g, 0.02)
    n_out = 1 if spec.kind == "linear" else max(2, spec.n_classes)
    classes = None if spec.kind == "linear" else tuple(f"k{i}" for i in range(n_out))
    return TrainedModel(ModelCard(spec, classes, scaler), params), raw_test, ds.y_test


def checkpoint(model: TrainedModel, path: Path) -> Path:
    """The model as `edgeps serve` would checkpoint it."""
    meta = {**model.card.to_dict(), "job": "t", "accuracy": 1.0}
    return save_checkpoint(path, Checkpoint(params=model.params, version=1, meta=meta))
