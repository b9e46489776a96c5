"""Raw samples cut into windows, and the per-channel scaler of windows and images.

A window of L samples of C channels is one row of C*L floats, channel first
(``row[c * L + t]`` is channel c at step t), the layout the conv kernels take
(`edgeps.kernels.layers`). Windows never cross a change of label or group (a
recording, a subject): each run of consecutive samples with one label and one
group is cut on its own, from its first sample, every ``stride`` samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod
from typing import Any

import numpy as np

from edgeps.model.scaler import Scaler


@dataclass(frozen=True)
class Windows:
    """Windows as rows, their labels and groups, and the samples no window took."""

    X: np.ndarray  # float32 (n_windows, C * L)
    y: np.ndarray | None  # the label of each window's samples
    groups: np.ndarray | None  # the group of each window's samples
    shape: tuple[int, int]  # (C, L)
    runs: int  # runs of one label and group
    short_runs: int  # runs shorter than a window: no window from them
    unused: int  # samples in no window (short runs, tails past the last stride)


def _run_starts(keys: list[np.ndarray], n: int) -> np.ndarray:
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


def cut_windows(
    samples: np.ndarray,
    labels: np.ndarray | None,
    groups: np.ndarray | None,
    window: int,
    stride: int,
    *,
    source: str = "data",
) -> Windows:
    """Cut raw samples (n, C) into windows of ``window`` steps every ``stride``.

    A window holds samples of one label and one group only; a group shorter
    than a window, or data giving no window at all, is a ``ValueError`` naming
    ``source``.
    """
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)):
        raise TypeError("window must be an int")
    if isinstance(stride, bool) or not isinstance(stride, (int, np.integer)):
        raise TypeError("stride must be an int")
    if window < 1 or stride < 1:
        raise ValueError(f"window ({window}) and stride ({stride}) must be >= 1")
    x = np.asarray(samples)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise ValueError(
            f"{source}: raw samples must be a non-empty (n, channels) array"
        )
    n, c = x.shape
    keys = []
    for name, k in (("labels", labels), ("groups", groups)):
        if k is not None:
            k = np.asarray(k)
            if k.shape != (n,):
                raise ValueError(f"{source}: {n} samples but {name} of shape {k.shape}")
            keys.append(k)
    if groups is not None:
        g = np.asarray(groups)
        g_starts = _run_starts([g], n)
        g_lens = np.diff(np.append(g_starts, n))
        if g_lens.min() < window:
            i = int(np.argmin(g_lens))
            name = str(g[g_starts[i]])
            raise ValueError(
                f"{source}: group {name!r} has {int(g_lens[i])} samples, "
                f"fewer than a window of {window}"
            )
    starts = _run_starts(keys, n)
    ends = np.append(starts[1:], n)
    picks: list[np.ndarray] = []
    short = 0
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if e - s < window:
            short += 1
            continue
        picks.append(np.arange(s, e - window + 1, stride))
    if not picks:
        raise ValueError(
            f"{source}: no window of {window} samples fits: the longest run of one "
            f"label{' and group' if groups is not None else ''} has "
            f"{int((ends - starts).max())} samples"
        )
    first = np.concatenate(picks)
    covered = np.zeros(n, dtype=bool)
    for f in first.tolist():
        covered[f : f + window] = True
    idx = first[:, None] + np.arange(window)[None, :]  # (m, L) sample numbers
    rows = np.transpose(x[idx], (0, 2, 1)).reshape(len(first), c * window)
    return Windows(
        X=np.ascontiguousarray(rows, dtype=np.float32),
        y=None if labels is None else np.asarray(labels)[first],
        groups=None if groups is None else np.asarray(groups)[first],
        shape=(c, window),
        runs=len(starts),
        short_runs=short,
        unused=int(n - covered.sum()),
    )


def check_shape(shape: tuple[int, ...] | None, n_features: int, source: str) -> None:
    """Refuse a sample shape whose size is not the row width."""
    if shape is None:
        return
    if len(shape) not in (2, 3) or any(int(v) < 1 for v in shape):
        raise ValueError(
            f"{source}: a sample shape is (C, L) or (C, H, W), got {shape}"
        )
    if prod(shape) != n_features:
        raise ValueError(
            f"{source}: samples of shape {shape} are {prod(shape)} values, "
            f"rows have {n_features}"
        )


def pool_channels(scaler: Scaler, shape: tuple[int, ...] | None) -> Scaler:
    """Per-feature moments pooled per channel (over every step or pixel of it),
    laid out again one value per feature, so the scaler keeps its width."""
    if shape is None:
        return scaler
    check_shape(shape, scaler.n_features, "scaler")
    c = int(shape[0])
    per = scaler.n_features // c
    s1 = np.repeat(scaler.s1.reshape(c, per).mean(axis=1), per)
    s2 = np.repeat(scaler.s2.reshape(c, per).mean(axis=1), per)
    return Scaler.from_moments(scaler.n, s1, s2)


def fit_scaler(X: np.ndarray, shape: tuple[int, ...] | None) -> Scaler:
    """The scaler of rows ``X``: per feature for tabular rows, per channel for
    windows and images (``shape`` (C, L) or (C, H, W))."""
    return pool_channels(Scaler.fit(X), shape)


@dataclass(frozen=True)
class Cut:
    """How a raw-sample CSV is cut: ``--window L --stride S --group COLUMN``."""

    window: int | None = None
    stride: int | None = None
    group: str | None = None

    def __post_init__(self) -> None:
        if self.window is None and (self.stride is not None or self.group):
            raise ValueError("--stride and --group go with --window (raw-sample CSVs)")
        for flag, v in (("--window", self.window), ("--stride", self.stride)):
            if v is not None and v < 1:
                raise ValueError(f"{flag} must be >= 1, got {v}")

    def flags(self) -> dict[str, Any]:
        """Keyword arguments for `edgeps.model.table.read_table`."""
        if self.window is None:
            return {}
        return {"window": self.window, "stride": self.stride, "group": self.group}


def check_fits(spec: Any, shape: tuple[int, ...] | None, source: str) -> None:
    """Refuse a conv model whose input shape is not the data's sample shape."""
    in_shape = getattr(spec, "in_shape", None)
    if not getattr(spec, "is_conv", False) or shape is None or in_shape is None:
        return
    if tuple(in_shape) != tuple(shape):
        raise ValueError(
            f"--model {spec} takes samples of shape {tuple(in_shape)}, {source} has "
            f"{tuple(shape)}"
        )
