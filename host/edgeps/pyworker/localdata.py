"""A worker's local training data: CSV or NPZ files, or a slice of a built-in dataset.

Everything comes back as ``LocalData`` (X float32 C-contiguous, y int32 class
ids when every label is a whole number, else float32 targets) and every
problem with a file is a ``ValueError`` that names the file and what is wrong.
"""

from __future__ import annotations

import csv
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAX_ROWS = 5_000_000  # refuse files that would not fit a small board's host anyway


@dataclass(frozen=True)
class LocalData:
    X: np.ndarray  # float32 (n, n_features), C-contiguous
    y: np.ndarray  # int32 class ids or float32 targets, (n,)
    source: str

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


def _finish(X: np.ndarray, y: np.ndarray, source: str) -> LocalData:
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{source}: features must be a non-empty 2-D array")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(
            f"{source}: {X.shape[0]} feature rows but labels of shape {y.shape}"
        )
    if X.shape[0] > MAX_ROWS:
        raise ValueError(f"{source}: more than {MAX_ROWS} rows")
    Xf = np.ascontiguousarray(X, dtype=np.float32)
    if not np.all(np.isfinite(Xf)):
        raise ValueError(f"{source}: features contain NaN or infinity")
    yf = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(yf)):
        raise ValueError(f"{source}: labels contain NaN or infinity")
    if np.all(yf == np.round(yf)) and np.all(np.abs(yf) < 2**31):
        yl: np.ndarray = np.ascontiguousarray(yf, dtype=np.int32)
    else:
        yl = np.ascontiguousarray(yf, dtype=np.float32)
    return LocalData(Xf, yl, source)


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def load_csv(path: str | Path) -> LocalData:
    """Read a CSV: features, then the label in the last column; header optional."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"data file not found: {p}")
    rows: list[list[float]] = []
    width = -1
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            for lineno, row in enumerate(csv.reader(fh), start=1):
                cells = [c.strip() for c in row]
                if not cells or all(c == "" for c in cells):
                    continue
                if width < 0 and not rows and not all(_is_number(c) for c in cells):
                    width = len(cells)  # a header: it fixes the width, no data
                    continue
                if width < 0:
                    width = len(cells)
                if len(cells) != width:
                    raise ValueError(
                        f"{p}:{lineno}: {len(cells)} columns, expected {width}"
                    )
                try:
                    rows.append([float(c) for c in cells])
                except ValueError:
                    raise ValueError(f"{p}:{lineno}: a cell is not a number") from None
                if len(rows) > MAX_ROWS:
                    raise ValueError(f"{p}: more than {MAX_ROWS} rows")
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not a UTF-8 text CSV file") from None
    except csv.Error as exc:
        raise ValueError(f"{p}: malformed CSV: {exc}") from None
    if not rows:
        raise ValueError(f"{p}: no data rows")
    if width < 2:
        raise ValueError(f"{p}: need at least one feature column and a label column")
    table = np.asarray(rows, dtype=np.float64)
    return _finish(table[:, :-1], table[:, -1], str(p))


def load_npz(path: str | Path) -> LocalData:
    """Read an NPZ archive holding arrays ``X`` (n, features) and ``y`` (n,)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"data file not found: {p}")
    try:
        with np.load(p, allow_pickle=False) as archive:
            missing = [k for k in ("X", "y") if k not in archive.files]
            if missing:
                raise ValueError(f"{p}: missing array(s) {', '.join(missing)}")
            X = archive["X"]
            y = archive["y"]
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{p}: not a readable .npz archive: {exc}") from None
    for name, arr in (("X", X), ("y", y)):
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{p}: array {name} has non-numeric dtype {arr.dtype}")
    return _finish(X, y, str(p))


def load_file(path: str | Path) -> LocalData:
    """Load a .csv or .npz file by its suffix."""
    suffix = Path(path).suffix.lower()
    if suffix == ".npz":
        return load_npz(path)
    if suffix in (".csv", ".txt"):
        return load_csv(path)
    raise ValueError(f"unsupported data file type {suffix!r} (use .csv or .npz)")


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
    return _finish(X, y, source), ds.model_spec
