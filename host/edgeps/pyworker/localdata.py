"""A worker's local training data: CSV or NPZ files, or a slice of a built-in dataset.

Everything comes back as ``LocalData`` (X float32 C-contiguous, y int32 class
ids when every label is a whole number or a class name, else float32 targets)
and every problem with a file is a ``ValueError`` that names the file and what
is wrong. Files are read by `edgeps.model.table` (header and label rules).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgeps.model.table import MAX_ROWS, Table, finish, read_csv, read_npz, read_table
from edgeps.model.windows import Cut

__all__ = ["MAX_ROWS", "LocalData", "load_csv", "load_emulated", "load_file"]


@dataclass(frozen=True)
class LocalData:
    X: np.ndarray  # float32 (n, n_features), C-contiguous
    y: np.ndarray  # int32 class ids or float32 targets, (n,)
    source: str
    classes: tuple[str, ...] | None = None  # names of the class ids (text labels)
    # the features before this worker scaled them itself (``--scale``): the
    # job's scaler, when its WELCOME carries one, applies to these instead
    raw_X: np.ndarray | None = None
    shape: tuple[int, ...] | None = None  # a window's (C, L), an image's (C, H, W)

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


def _finish(X: np.ndarray, y: np.ndarray, source: str) -> LocalData:
    return _local(finish(X, y, source))


def _local(table: Table) -> LocalData:
    if table.y is None:
        raise ValueError(f"{table.source}: missing array(s) y (the labels)")
    return LocalData(table.X, table.y, table.source, table.classes, shape=table.shape)


def load_csv(
    path: str | Path,
    *,
    label: str | None = None,
    classes: Sequence[str] | None = None,
) -> LocalData:
    """Read a CSV: features, then the label (named, or the last column)."""
    return _local(read_csv(path, label=label, classes=classes))


def load_npz(path: str | Path, *, classes: Sequence[str] | None = None) -> LocalData:
    """Read an NPZ archive holding arrays ``X`` (n, features) and ``y`` (n,)."""
    return _local(read_npz(path, classes=classes))


def load_file(
    path: str | Path,
    *,
    label: str | None = None,
    classes: Sequence[str] | None = None,
    cut: Cut | None = None,
    part: tuple[int, int] | None = None,
) -> LocalData:
    """Load a .csv or .npz file by its suffix; ``cut`` windows raw samples,
    and ``part`` (I, N) keeps the whole groups `partition_groups` deals to I."""
    flags = cut.flags() if cut is not None else {}
    if part is not None and not flags.get("group"):
        raise ValueError(
            f"{path}: --part deals whole groups: give --window and --group"
        )
    table = read_table(path, label=label, classes=classes, **flags)
    data = _local(table)
    if part is None or table.groups is None:
        return data
    from edgeps.workloads.datasets import partition_groups

    index, n = part
    rows = partition_groups(table.groups, n)[index]
    kept = sorted(set(table.groups[rows].tolist()))
    return LocalData(
        np.ascontiguousarray(data.X[rows]),
        data.y[rows],
        f"{data.source}:{index}/{n} (groups {', '.join(kept)})",
        data.classes,
        shape=data.shape,
    )


def parse_part(text: str | None) -> tuple[int, int] | None:
    """``--part I/N``: this worker's index I of N; None when not given."""
    if text is None:
        return None
    m = re.match(r"^(\d+)/(\d+)$", text.strip())
    if m is None or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"--part must be I/N with 0 <= I < N, got {text!r}")
    return int(m.group(1)), int(m.group(2))


_EMULATED = re.compile(r"^([A-Za-z0-9_-]+)(?::(\d+)/(\d+))?$")


def parse_emulated(spec: str) -> tuple[str, int, int]:
    """Parse ``DATASET[:PART/N]`` into (name, part, n); the whole set is part 0 of 1."""
    m = _EMULATED.match(spec.strip()) if isinstance(spec, str) else None
    if m is None:
        raise ValueError(f"expected DATASET or DATASET:PART/N, got {spec!r}")
    name, part, n = m.group(1), m.group(2), m.group(3)
    if part is None:
        return name, 0, 1
    ip, inn = int(part), int(n)
    if inn < 1 or not 0 <= ip < inn:
        raise ValueError(f"partition {ip}/{inn}: need N >= 1 and 0 <= PART < N")
    return name, ip, inn


def load_emulated(
    spec: str, seed: int = 0, scheme: str = "iid"
) -> tuple[LocalData, str]:
    """One worker's shard of a built-in dataset, and the dataset's model spec.

    ``spec`` is ``DATASET[:PART/N]``; ``scheme`` is ``"iid"`` or
    ``"dirichlet:ALPHA"`` (label-skewed). The same seed gives every worker the
    same split, so N workers started separately hold disjoint shards.
    """
    from edgeps.workloads import datasets

    name, part, n = parse_emulated(spec)
    ds = datasets.load_dataset(name, seed)
    shards = datasets.partition(ds.y_train, n, scheme, seed)
    X, y = ds.shard(shards[part])
    source = f"{name}:{part}/{n}" if n > 1 else name
    return _local(finish(X, y, source, shape=ds.shape)), ds.model_spec
