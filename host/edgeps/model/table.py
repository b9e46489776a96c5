"""Data files (CSV, NPZ) read into features, labels and class names.

One reader for every command that takes a data file: `edgeps serve
--test-data`, `edgeps worker --data`, `edgeps predict --data`. Rows are
tabular features, or windows and images: an NPZ whose ``X`` is (n, C, L) or
(n, C, H, W), or a CSV of raw samples cut with ``window``/``stride``
(`edgeps.model.windows`); each is one row of C*L (C*H*W) floats, channel
first, and ``Table.shape`` keeps a sample's shape.

CSV rules. Empty lines are skipped; every row has the same number of cells.
The label is the column named by ``label`` (then the first row must be a
header holding that name) or else the last column; with ``n_features`` given,
a file that is exactly that wide has no label column. With ``label`` the
first row is the header. Otherwise it is a header when none of its feature
cells is a number (data rows hold numbers there), and refused when some are
and some are not. When only its label cell is text, it is data if that text is one of
the known classes or appears again in the label column, and a header if the
other labels are numbers; otherwise it cannot be told apart and the file is
refused with a message saying how to settle it. No row is dropped silently.

Labels: numbers stay numbers (whole numbers become class ids, others
regression targets); text labels become class ids by their position in
``classes`` when given (the job's label names), else in the sorted unique
names of the file.
"""

from __future__ import annotations

import csv
import logging
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from edgeps.model.windows import check_shape, cut_windows

log = logging.getLogger(__name__)

MAX_ROWS = 5_000_000  # refuse files that would not fit a small board's host anyway


@dataclass(frozen=True)
class Table:
    """Raw features, labels (None when the file has none) and their names."""

    X: np.ndarray  # float32 (n, n_features), C-contiguous, finite
    y: np.ndarray | None  # int32 class ids or float32 targets, (n,)
    classes: tuple[str, ...] | None  # names of the class ids, when labels were text
    feature_names: tuple[str, ...] | None  # from a header
    source: str
    shape: tuple[int, ...] | None = None  # a window's (C, L), an image's (C, H, W)
    groups: np.ndarray | None = None  # each window's group (``--group``), as text

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.X.shape[1])


def is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def parse_classes(text: str | None) -> tuple[str, ...] | None:
    """``"a,b,c"`` -> ("a", "b", "c"); the names must be distinct and non-empty."""
    if text is None:
        return None
    names = tuple(n.strip() for n in text.split(","))
    check_classes(names)
    return names


def check_classes(names: Sequence[str]) -> None:
    if len(names) < 2 or any(not n for n in names) or len(set(names)) != len(names):
        raise ValueError(
            f"class names must be 2 or more distinct non-empty names, got {names!r}"
        )


def _numeric_labels(y: np.ndarray, source: str) -> np.ndarray:
    yf = np.asarray(y, dtype=np.float64)
    if not np.all(np.isfinite(yf)):
        raise ValueError(f"{source}: labels contain NaN or infinity")
    if np.all(yf == np.round(yf)) and np.all(np.abs(yf) < 2**31):
        return np.ascontiguousarray(yf, dtype=np.int32)
    return np.ascontiguousarray(yf, dtype=np.float32)


def name_labels(
    names: Sequence[str], classes: Sequence[str] | None, source: str
) -> tuple[np.ndarray, tuple[str, ...]]:
    """Class ids of text labels by the position of each name in ``classes``."""
    known = tuple(classes) if classes is not None else tuple(sorted(set(names)))
    index = {n: i for i, n in enumerate(known)}
    ids = np.empty(len(names), dtype=np.int32)
    for i, n in enumerate(names):
        k = index.get(n)
        if k is None:
            raise ValueError(
                f"{source}: label {n!r} (row {i + 1}) is not one of the classes "
                f"{', '.join(known)}"
            )
        ids[i] = k
    return ids, known


def finish(
    X: np.ndarray,
    y: np.ndarray | None,
    source: str,
    *,
    classes: tuple[str, ...] | None = None,
    feature_names: tuple[str, ...] | None = None,
    shape: tuple[int, ...] | None = None,
) -> Table:
    """Checked float32 features and labels in the dtypes the kernels take."""
    if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{source}: features must be a non-empty 2-D array")
    if X.shape[0] > MAX_ROWS:
        raise ValueError(f"{source}: more than {MAX_ROWS} rows")
    Xf = np.ascontiguousarray(X, dtype=np.float32)
    if not np.all(np.isfinite(Xf)):
        raise ValueError(f"{source}: features contain NaN or infinity")
    if y is not None:
        if y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise ValueError(
                f"{source}: {X.shape[0]} feature rows but labels of shape {y.shape}"
            )
        if classes is None:
            y = _numeric_labels(y, source)
    check_shape(shape, Xf.shape[1], source)
    return Table(Xf, y, classes, feature_names, source, shape)


def _read_rows(p: Path) -> list[tuple[int, list[str]]]:
    rows: list[tuple[int, list[str]]] = []
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            for lineno, row in enumerate(csv.reader(fh), start=1):
                cells = [c.strip() for c in row]
                if not cells or all(c == "" for c in cells):
                    continue
                if rows and len(cells) != len(rows[0][1]):
                    raise ValueError(
                        f"{p}:{lineno}: {len(cells)} columns, expected "
                        f"{len(rows[0][1])}"
                    )
                rows.append((lineno, cells))
                if len(rows) > MAX_ROWS + 1:
                    raise ValueError(f"{p}: more than {MAX_ROWS} rows")
    except UnicodeDecodeError:
        raise ValueError(f"{p}: not a UTF-8 text CSV file") from None
    except csv.Error as exc:
        raise ValueError(f"{p}: malformed CSV: {exc}") from None
    if not rows:
        raise ValueError(f"{p}: no data rows")
    return rows


def _first_is_header(
    rows: list[tuple[int, list[str]]],
    col: int | None,
    classes: Sequence[str] | None,
    p: Path,
) -> bool:
    cells = rows[0][1]
    feats = [c for i, c in enumerate(cells) if i != col]
    texts = [c for c in feats if not is_number(c)]
    if texts and len(texts) == len(feats):
        return True
    if texts:
        number = next(c for c in feats if is_number(c))
        raise ValueError(
            f"{p}:{rows[0][0]}: the first row has text ({texts[0]!r}) in some "
            f"feature cells and numbers ({number!r}) in others: a header with "
            "numeric names, or a data row with bad cells? If it is a header, "
            "name the label column (--label NAME); if it is data, fix the cells"
        )
    if col is None or is_number(cells[col]):
        return False
    name = cells[col]
    rest = [r[col] for _, r in rows[1:]]
    if (classes is not None and name in classes) or name in rest:
        return False
    if rest and all(is_number(c) for c in rest):
        return True
    raise ValueError(
        f"{p}:{rows[0][0]}: the first row has numbers for features and the "
        f"label {name!r}, which no other row has: a header, or a data row of a "
        "class seen once? If it is a header, name the label column (--label "
        f"{name}); if it is data, give the class names (--classes A,B,...)"
    )


def read_csv(
    path: str | Path,
    *,
    label: str | None = None,
    classes: Sequence[str] | None = None,
    n_features: int | None = None,
) -> Table:
    """Read a CSV by the rules in this module's docstring."""
    return _read_csv(Path(path), label, classes, n_features, None)[0]


def _group_column(rows: list[tuple[int, list[str]]], group: str, p: Path) -> int:
    first = rows[0][1]
    if group not in first:
        raise ValueError(
            f"{p}: --group {group!r}: no such column in the first row (the "
            f"header: {', '.join(first[:8])}{', ...' if len(first) > 8 else ''})"
        )
    return first.index(group)


def _read_csv(
    p: Path,
    label: str | None,
    classes: Sequence[str] | None,
    n_features: int | None,
    group: str | None,
) -> tuple[Table, list[str] | None]:
    """The table, and the group column's cells when ``group`` names one."""
    if not p.is_file():
        raise ValueError(f"data file not found: {p}")
    rows = _read_rows(p)
    width = len(rows[0][1])
    header: list[str] | None = None
    gcol = _group_column(rows, group, p) if group is not None else None
    if gcol is not None:
        header = rows[0][1]
    if label is not None:
        first = rows[0][1]
        if label not in first:
            raise ValueError(
                f"{p}: --label {label!r}: no such column in the first row "
                f"({', '.join(first[:8])}{', ...' if width > 8 else ''})"
            )
        col: int | None = first.index(label)
        header = first
    elif gcol is not None:
        others = [i for i in range(width) if i != gcol]
        col = None if n_features is not None and width - 1 == n_features else others[-1]
    else:
        col = None if n_features is not None and width == n_features else width - 1
        if _first_is_header(rows, col, classes, p):
            header = rows[0][1]
    if gcol is not None and gcol == col:
        raise ValueError(f"{p}: --group and the label name the same column")
    body = rows[1:] if header is not None else rows
    if not body:
        raise ValueError(f"{p}: no data rows after the header")
    if col is not None and width < 2:
        raise ValueError(f"{p}: need at least one feature column and a label column")
    feats = [i for i in range(width) if i not in (col, gcol)]
    if not feats:
        raise ValueError(f"{p}: no feature column besides the label and the group")
    X = np.empty((len(body), len(feats)), dtype=np.float64)
    for r, (lineno, cells) in enumerate(body):
        try:
            X[r] = [float(cells[i]) for i in feats]
        except ValueError:
            bad = next(cells[i] for i in feats if not is_number(cells[i]))
            raise ValueError(
                f"{p}:{lineno}: feature cell {bad!r} is not a number"
            ) from None
    groups = [cells[gcol] for _, cells in body] if gcol is not None else None
    names = tuple(header[i] for i in feats) if header is not None else None
    if col is None:
        return finish(X, None, str(p), feature_names=names), groups
    labels = [cells[col] for _, cells in body]
    if classes is None and all(is_number(c) for c in labels):
        values = np.array([float(c) for c in labels])
        return finish(X, values, str(p), feature_names=names), groups
    ids, known = name_labels(labels, classes, str(p))
    return finish(X, ids, str(p), classes=known, feature_names=names), groups


def read_samples(
    path: str | Path,
    *,
    window: int,
    stride: int,
    label: str | None = None,
    group: str | None = None,
    classes: Sequence[str] | None = None,
    channels: int | None = None,
) -> Table:
    """A CSV of raw samples (one per row: channels, a label, a group) as windows.

    ``channels`` (the model's) tells a file without a label column; the
    windows never cross a change of label or group (`cut_windows`).
    """
    p = Path(path)
    if p.suffix.lower() not in (".csv", ".txt"):
        raise ValueError(
            f"{p}: --window cuts a CSV of raw samples; an NPZ holds its windows "
            "or images already (X of shape (n, C, L) or (n, C, H, W))"
        )
    raw, groups = _read_csv(p, label, classes, channels, group)
    g = np.asarray(groups) if groups is not None else None
    w = cut_windows(raw.X, raw.y, g, window, stride, source=str(p))
    if w.unused:
        log.warning(
            "%s: %d of %d samples are in no window (%d runs of one label%s "
            "shorter than %d, or tails past the last stride)",
            p,
            w.unused,
            raw.n_samples,
            w.short_runs,
            " and group" if g is not None else "",
            window,
        )
    names = None
    if raw.feature_names is not None:
        names = tuple(f"{n}[{t}]" for n in raw.feature_names for t in range(window))
    table = finish(
        w.X, w.y, str(p), classes=raw.classes, feature_names=names, shape=w.shape
    )
    return replace(table, groups=w.groups)


def read_npz(path: str | Path, *, classes: Sequence[str] | None = None) -> Table:
    """Read an NPZ archive: ``X`` (n, features), ``y`` (n,; numbers or text)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"data file not found: {p}")
    try:
        with np.load(p, allow_pickle=False) as archive:
            if "X" not in archive.files:
                raise ValueError(f"{p}: missing array X")
            X = archive["X"]
            y = archive["y"] if "y" in archive.files else None
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{p}: not a readable .npz archive: {exc}") from None
    except ValueError as exc:  # object arrays: ragged windows, mixed types
        if "missing array X" in str(exc):
            raise
        raise ValueError(
            f"{p}: X or y is not a plain numeric array (ragged windows or "
            f"Python objects?): {exc}"
        ) from None
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{p}: array X has non-numeric dtype {X.dtype}")
    X, shape = _samples(X, p)
    if y is None:
        return finish(X, None, str(p), shape=shape)
    if y.dtype.kind in "US":
        texts = [str(v.decode() if isinstance(v, bytes) else v) for v in y.reshape(-1)]
        ids, known = name_labels(texts, classes, str(p))
        return finish(X, ids, str(p), classes=known, shape=shape)
    if y.dtype.kind not in "biuf":
        raise ValueError(f"{p}: array y has non-numeric dtype {y.dtype}")
    if classes is not None:  # numeric labels named by the job: match them as text
        texts = [format(v, "g") for v in y.reshape(-1).tolist()]
        ids, known = name_labels(texts, classes, str(p))
        return finish(X, ids, str(p), classes=known, shape=shape)
    return finish(X, y, str(p), shape=shape)


def _samples(X: np.ndarray, p: Path) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """Rows (n, features) as they are; windows (n, C, L) and images (n, C, H, W)
    flattened channel first, with their shape."""
    if X.ndim == 2:
        return X, None
    if X.ndim in (3, 4) and X.shape[0] > 0 and min(X.shape[1:]) > 0:
        return X.reshape(X.shape[0], -1), tuple(int(v) for v in X.shape[1:])
    raise ValueError(
        f"{p}: X has shape {X.shape}: expected 2-D rows (n, features), windows "
        "(n, C, L) or images (n, C, H, W)"
    )


def read_table(
    path: str | Path,
    *,
    label: str | None = None,
    classes: Sequence[str] | None = None,
    n_features: int | None = None,
    window: int | None = None,
    stride: int | None = None,
    group: str | None = None,
    channels: int | None = None,
) -> Table:
    """Read a .csv/.txt or .npz file by its suffix; with ``window``, a CSV of
    raw samples cut into windows every ``stride`` (default: ``window``)."""
    suffix = Path(path).suffix.lower()
    if window is not None:
        step = window if stride is None else stride
        return read_samples(
            path,
            window=window,
            stride=step,
            label=label,
            group=group,
            classes=classes,
            channels=channels,
        )
    if stride is not None or group is not None:
        raise ValueError("--stride and --group go with --window (raw-sample CSVs)")
    if suffix == ".npz":
        if label is not None:
            raise ValueError(f"{path}: --label names a CSV column; an NPZ has X and y")
        return read_npz(path, classes=classes)
    if suffix in (".csv", ".txt"):
        return read_csv(path, label=label, classes=classes, n_features=n_features)
    raise ValueError(f"unsupported data file type {suffix!r} (use .csv or .npz)")
