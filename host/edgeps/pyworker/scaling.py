"""A data file made ready for the job: text labels named, features scaled.

Until the job's welcome carries the job's scaler and label names, a worker
with a data file scales by its own file (``--scale``) or by a shared one
(``--scaler-from``), and names text labels by ``--classes`` or by its own
sorted names; what may differ from the job is logged as a warning.
"""

from __future__ import annotations

import argparse
import logging

import numpy as np

from edgeps.kernels import ModelSpec
from edgeps.model.scaler import Scaler
from edgeps.model.table import parse_classes, read_table
from edgeps.model.windows import Cut, check_fits, fit_scaler
from edgeps.pyworker.localdata import LocalData, load_file, parse_part

log = logging.getLogger("edgeps.pyworker")

# a file whose features stray this far from mean 0, std 1 was not standardised
UNSCALED_MEAN = 3.0
UNSCALED_STD = 10.0


def looks_unscaled(X: np.ndarray) -> bool:
    """True when some feature's mean or std is far from a standardised one's."""
    mean = np.abs(X.mean(axis=0, dtype=np.float64))
    std = X.std(axis=0, dtype=np.float64)
    return bool(mean.max() > UNSCALED_MEAN or std.max() > UNSCALED_STD)


def warn_if_raw(source: str, X: np.ndarray) -> bool:
    """Warn (and say True) when ``X`` looks unscaled: called when the job's
    WELCOME brings no scaler, so raw features are what this worker trains on.
    Raw files are the documented way when the job has a scaler: no warning."""
    if not looks_unscaled(X):
        return False
    log.warning(
        "%s: features look unscaled (mean up to %.3g, std up to %.3g) and the "
        "job has no scaler: it trains slowly or not at all on raw features "
        "(serve --test-data gives the job one; or pass --scale here)",
        source,
        float(np.abs(X.mean(axis=0, dtype=np.float64)).max()),
        float(X.std(axis=0, dtype=np.float64).max()),
    )
    return True


def load_local(args: argparse.Namespace) -> LocalData:
    """``--data`` read with ``--label``/``--classes``, scaled by ``--scale*``."""
    classes = parse_classes(args.classes)
    cut = data_cut(args)
    part = parse_part(getattr(args, "part", None))
    data = load_file(args.data, label=args.label, classes=classes, cut=cut, part=part)
    scaler: Scaler | None = None
    if args.scaler_from:
        source = read_table(
            args.scaler_from, label=args.label, classes=classes, **cut.flags()
        )
        scaler = fit_scaler(source.X, data.shape)
        where = f"{args.scaler_from}'s"
    elif args.scale:
        scaler = fit_scaler(data.X, data.shape)
        where = "this file's own"
        log.warning(
            "%s: features scaled by this file's own mean and std until the "
            "job's welcome brings the job's scaler, which replaces it",
            data.source,
        )
    if scaler is None:
        return data
    if scaler.n_features != data.n_features:
        raise ValueError(
            f"--scaler-from {args.scaler_from} has {scaler.n_features} features, "
            f"{data.source} has {data.n_features}"
        )
    log.info("%s: features standardised by %s mean and std", data.source, where)
    return LocalData(
        scaler.transform(data.X),
        data.y,
        data.source,
        data.classes,
        raw_X=data.X,
        shape=data.shape,
    )


def data_cut(args: argparse.Namespace) -> Cut:
    """``--window``/``--stride``/``--group``: how a raw-sample CSV is windowed."""
    return Cut(
        getattr(args, "window", None),
        getattr(args, "stride", None),
        getattr(args, "group", None),
    )


def check_classes(spec: ModelSpec, data: LocalData, *, given: bool) -> None:
    """Refuse text labels that cannot be the job's classes: more names than
    the model has. The job's WELCOME names its classes, and the trainer
    renumbers this file's to them (``NativeTrainer.set_classes``), so a file
    holding only some of them (a non-IID shard) trains as the others do."""
    check_fits(spec, data.shape, data.source)
    if data.classes is None or spec.kind == "linear":
        return
    n = 2 if spec.kind == "logistic" else spec.n_classes
    if len(data.classes) > n:
        raise ValueError(
            f"{data.source} has the classes {', '.join(data.classes)} but the job's "
            f"model {spec} has {n}"
        )
