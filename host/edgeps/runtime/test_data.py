"""The data a job evaluates on, and the model spec and card it fixes.

``--test-data FILE`` (CSV or NPZ, read by `edgeps.model.table`) gives the
feature count, the classes (text labels: their sorted names) and, unless
``--no-scale``, the feature scaler (from ``--scaler-from FILE`` or the test
file itself; ``--scaler-from workers``: none yet, the workers' data fixes it,
see `edgeps.runtime.scaler_gate`). ``--dataset NAME`` takes a built-in set's
held-out split, already standardised, with no scaler. Windows and images (an
NPZ of (n, C, L) or (n, C, H, W), a CSV cut by ``--window``) keep their sample
shape, which completes conv models, and their scaler is per channel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edgeps.kernels import ModelSpec
from edgeps.model.card import ModelCard
from edgeps.model.scaler import Scaler
from edgeps.model.table import read_table
from edgeps.model.windows import Cut, check_fits, fit_scaler
from edgeps.runtime.config import SCALER_FROM_WORKERS
from edgeps.runtime.model_forms import complete_model

__all__ = [
    "ModelCard",
    "TestData",
    "builtin_test_data",
    "job_spec",
    "load_test_data",
    "worker_hint",
]


@dataclass(frozen=True)
class TestData:
    """Raw held-out features and labels, with what the job learns from them."""

    __test__ = False  # not a pytest class, whatever its name

    X: np.ndarray  # raw float32 features
    y: np.ndarray  # int32 class ids or float32 targets
    classes: tuple[str, ...] | None
    scaler: Scaler | None
    feature_names: tuple[str, ...] | None = None
    default_model: str | None = None  # a built-in dataset's spec
    shape: tuple[int, ...] | None = None  # a window's (C, L), an image's (C, H, W)

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])

    @property
    def is_regression(self) -> bool:
        return self.y.dtype.kind == "f"

    @property
    def n_classes(self) -> int:
        if self.classes is not None:
            return len(self.classes)
        if self.is_regression:
            return 2  # a placeholder: only linear fits, job_spec checks it
        return max(2, int(self.y.max()) + 1)


def load_test_data(
    path: str,
    label: str | None,
    scaler_from: str | None,
    scale: bool = True,
    windows: Cut | None = None,
) -> TestData:
    """``--test-data`` and its scaler (``--scaler-from`` or the file itself);
    ``windows`` cuts raw-sample CSVs (``--window``, ``--stride``, ``--group``)."""
    cut = windows.flags() if windows is not None else {}
    table = read_table(path, label=label, **cut)
    if table.y is None:
        raise ValueError(f"--test-data {path}: no label column")
    if table.y.dtype.kind != "f" and np.unique(table.y).size < 2:
        one = table.classes[0] if table.classes else str(int(table.y[0]))
        raise ValueError(
            f"--test-data {path}: every label is {one!r}: a classifier's test "
            "file needs rows of 2 or more classes"
        )
    scaler = None
    if scaler_from is not None and not scale:
        raise ValueError("--scaler-from and --no-scale contradict each other")
    if scaler_from == SCALER_FROM_WORKERS:
        pass  # fixed while the job runs, from its workers' moments
    elif scaler_from is not None:
        source = read_table(scaler_from, label=label, classes=table.classes, **cut)
        if source.n_features != table.n_features:
            raise ValueError(
                f"--scaler-from {scaler_from} has {source.n_features} features, "
                f"--test-data {path} has {table.n_features}"
            )
        scaler = fit_scaler(source.X, table.shape)
    elif scale:
        scaler = fit_scaler(table.X, table.shape)
    return TestData(
        table.X,
        table.y,
        table.classes,
        scaler,
        table.feature_names,
        shape=table.shape,
    )


def builtin_test_data(name: str, seed: int) -> TestData:
    """A built-in dataset's held-out split (standardised already: no scaler)."""
    from edgeps.workloads.datasets import ACTIVITY_CLASSES, load_dataset

    try:
        ds = load_dataset(name, seed)
    except ValueError as exc:
        if name.lower().endswith((".csv", ".npz", ".txt")):
            raise ValueError(f"{exc}; for your own data: --test-data {name}") from None
        raise
    classes = ACTIVITY_CLASSES if name == "sensors" else ds.classes
    return TestData(
        ds.X_test, ds.y_test, classes, None, None, ds.model_spec, shape=ds.shape
    )


def _default_model(data: TestData) -> str:
    if data.is_regression:
        return "linear"
    return "logistic" if data.n_classes == 2 else "mlp"


def job_spec(text: str | None, data: TestData, name: str) -> ModelSpec:
    """``--model`` (short forms completed from the data) checked against the data."""
    shape = data.shape
    if text:
        full = complete_model(text, data.n_features, data.n_classes, shape)
    elif data.default_model is not None:
        full = data.default_model
    else:
        full = complete_model(
            _default_model(data), data.n_features, data.n_classes, shape
        )
    spec = ModelSpec.parse(full)
    if spec.n_features != data.n_features:
        hint = "" if data.default_model is None else " (your own data: --test-data)"
        raise ValueError(
            f"--model {spec} takes {spec.n_features} features but {name} has "
            f"{data.n_features}{hint}"
        )
    check_fits(spec, shape, name)
    if data.is_regression and spec.kind != "linear":
        raise ValueError(f"{name} has real-valued labels: only a linear model fits")
    want_classes = 1 if spec.kind in ("linear", "logistic") else data.n_classes
    if spec.kind != "linear" and spec.n_classes != want_classes:
        raise ValueError(
            f"--model {spec} has {spec.n_classes} outputs but {name} needs "
            f"{want_classes}"
        )
    if spec.kind == "logistic" and data.n_classes != 2:
        raise ValueError(f"--model {spec}: logistic needs 2 classes, {name} has more")
    return spec


def check_resume(card: ModelCard, meta: dict[str, object], path: str) -> None:
    """Refuse resuming a checkpoint whose classes or scaler the job would change."""
    old_classes = meta.get("classes")
    if isinstance(old_classes, list) and tuple(old_classes) != card.classes:
        raise ValueError(
            f"--resume {path}: the checkpoint's classes {old_classes} differ from "
            f"the job's {list(card.classes or ())}"
        )
    old = meta.get("scaler")
    if (old is None) != (card.scaler is None) or (
        old is not None
        and card.scaler is not None
        and not np.allclose(Scaler.from_dict(old).mean, card.scaler.mean)
    ):
        raise ValueError(
            f"--resume {path}: the checkpoint's feature scaler differs from the "
            "job's (give the same --test-data or --scaler-from, or --no-scale)"
        )


def resumed_scaler(path: str) -> Scaler | None:
    """The scaler a ``--resume`` checkpoint of a ``--scaler-from workers`` job
    fixed; None when it fixed none (it then trained nothing: workers fix it)."""
    from edgeps.runtime.checkpoint import load_checkpoint

    ckpt = load_checkpoint(path)
    scaler = ckpt.meta.get("scaler")
    if scaler is not None:
        return Scaler.from_dict(scaler)
    if ckpt.version > 0:
        raise ValueError(
            f"--resume {path}: the checkpoint was trained without a feature "
            "scaler; resume it as it ran (--no-scale), not --scaler-from workers"
        )
    return None


def worker_hint(label: str | None, cut: Cut | None = None) -> str:
    """Flags a worker with a data file needs for this job, for serve's banner
    (the job's scaler and class names reach it in its WELCOME)."""
    hint = "--data FILE " + (f"--label {label} " if label else "")
    if cut is not None and cut.window is not None:
        hint += f"--window {cut.window} "
        hint += f"--stride {cut.stride} " if cut.stride is not None else ""
        hint += f"--group {cut.group} " if cut.group else ""
    return hint
