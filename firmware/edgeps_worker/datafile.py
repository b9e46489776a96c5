"""Data files for a worker: CSV into a ring buffer, EPSD writer, open by file name.

CSV: one sample per line, features then the label last, '#' starts a comment.
The EPSD binary format is described in ``data``.
"""

import struct

from edgeps_worker.data import HEADER, LABEL_INT, MAGIC, FileSource
from edgeps_worker.ring import RingBuffer


def load_csv(path, n_features, capacity, label_kind=LABEL_INT, seed=1):
    """Read a CSV file into a RingBuffer (the last ``capacity`` rows are kept)."""
    ring = RingBuffer(capacity, n_features, label_kind, seed)
    row = [0.0] * n_features
    with open(path) as f:
        lineno = 0
        for line in f:
            lineno += 1
            line = line.strip()
            if not line or line[0] == "#":
                continue
            cells = line.split(",")
            if len(cells) != n_features + 1:
                raise ValueError(
                    path
                    + ":"
                    + str(lineno)
                    + ": expected "
                    + str(n_features + 1)
                    + " values"
                )
            try:
                for i in range(n_features):
                    row[i] = float(cells[i])
                label = int(cells[-1]) if label_kind == LABEL_INT else float(cells[-1])
            except ValueError:
                raise ValueError(path + ":" + str(lineno) + ": not a number") from None
            ring.add(row, label)
    if ring.size == 0:
        raise ValueError(path + ": no samples")
    return ring


def write_file(path, rows, labels, label_kind=LABEL_INT):
    """Write samples (a list of feature lists) and labels as an EPSD file."""
    if not rows or len(rows) != len(labels):
        raise ValueError("need as many labels as rows, at least one")
    nf = len(rows[0])
    fmt = "<" + "f" * nf + ("i" if label_kind == LABEL_INT else "f")
    with open(path, "wb") as f:
        f.write(struct.pack(HEADER, MAGIC, 1, label_kind, nf, len(rows)))
        for r in range(len(rows)):
            if len(rows[r]) != nf:
                raise ValueError("all rows need the same number of features")
            f.write(struct.pack(fmt, *(list(rows[r]) + [labels[r]])))


def open_source(path, n_features, label_kind=LABEL_INT, capacity=256, seed=1):
    """A source for a data file: CSV (.csv) into a ring, else an EPSD binary file."""
    if path.endswith(".csv"):
        return load_csv(path, n_features, capacity, label_kind, seed)
    src = FileSource(path, seed)
    if src.n_features != n_features or src.label_kind != label_kind:
        src.close()
        raise ValueError(
            path
            + " has "
            + str(src.n_features)
            + " features and label kind "
            + str(src.label_kind)
            + "; the model wants "
            + str(n_features)
            + " and "
            + str(label_kind)
        )
    return src
