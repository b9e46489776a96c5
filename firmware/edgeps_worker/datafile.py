"""Data files for a worker: CSV into a ring buffer, EPSD writer, open by file name.

CSV: one sample per line, features then the label last, '#' starts a comment,
an optional header row, labels class ids or class names (``csvtext`` has the
rules, shared with inference mode's CSV rows).
The EPSD binary format is described in ``data``.
"""

import struct

from edgeps_worker import unload
from edgeps_worker.data import HEADER, LABEL_INT, MAGIC, FileSource
from edgeps_worker.ring import RingBuffer


class CsvRing(RingBuffer):
    """A ring of a CSV's rows. Text labels get ids in the order first seen;
    ``set_classes`` renumbers them to the job's class names (its WELCOME), and
    a job that names none takes them in sorted order, as the host worker does."""

    classes = None  # the names of the label ids, when the labels were text
    mapped = True
    path = ""  # the file, for messages

    def set_classes(self, names):
        """The job's class names (bytes, one per line; None: sorted names);
        ValueError when a label of this file is not one of them."""
        have = self.classes
        if have is None or names is None and self.mapped:
            return
        job = sorted(have) if names is None else bytes(names).decode().split("\n")
        missing = [c for c in have if c not in job]
        if missing:
            raise ValueError(
                self.path + ": labels " + ", ".join(missing)
                + " are not among the job's classes " + ", ".join(job)
            )  # fmt: skip
        remap = [job.index(c) for c in have]
        y = self.y
        for i in range(self.size):
            y[i] = remap[y[i]]
        self.classes, self.mapped = job, True

    def draw(self, n):
        if not self.mapped:
            self.set_classes(None)
        return RingBuffer.draw(self, n)

    def batch(self, X, y, n):
        if not self.mapped:
            self.set_classes(None)
        return RingBuffer.batch(self, X, y, n)

    rows = batch


def load_csv(path, n_features, capacity, label_kind=LABEL_INT, seed=1):
    """Read a CSV file (``csvtext``'s rules: features, then the label last)
    into a CsvRing; the last ``capacity`` rows are kept."""
    # the ring's arrays first, while the heap is unfragmented; the reader's
    # code after, and off the heap again once the file is read
    ring = CsvRing(capacity, n_features, label_kind, seed)
    ring.path = path
    from edgeps_worker import csvtext

    try:
        csvtext.fill(ring, path)
    finally:
        csvtext = None
        unload("csvtext")
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
