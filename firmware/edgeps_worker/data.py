"""Local training data for a worker: the EPSD file source, labels, a seeded sampler.

Every source offers ``n_features``, ``count()`` and ``batch(X, y, n) -> rows``
which samples up to n rows (with a seeded xorshift, so CPython and MicroPython
draw the same rows) into caller-owned buffers: ``X`` is array('f') of
n * n_features, ``y`` an array of n labels ('i' class ids or 'f' targets).
A batch can also be read in chunks: ``draw(n)`` returns the rows the batch
has (a sensor source takes its readings first), then ``rows(X, y, m)``
samples the next m of them; the chunks draw the same rows as one ``batch``.

Binary file format (little-endian): magic b"EPSD", u8 version 1, u8 label kind
(0: int32 class ids, 1: float32 targets), u16 n_features, u32 n_samples, then
per sample n_features float32 followed by the label (int32 or float32). A file
is read a row at a time with seek + readinto, so RAM use stays one batch.
The ring buffer behind sensor and CSV sources is in ``ring``, CSV files and
writing EPSD files in ``datafile``: a board that trains from a binary file
imports neither, so their code stays off its heap.
"""

import struct

MAGIC = b"EPSD"
HEADER = "<4sBBHI"
HEADER_LEN = 12
LABEL_INT = 0
LABEL_FLOAT = 1


class XorShift:
    """xorshift32: a tiny seeded generator, identical on every Python."""

    def __init__(self, seed=1):
        self.state = (seed & 0xFFFFFFFF) or 0x9E3779B9

    def next(self):
        x = self.state
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        self.state = x
        return x

    def below(self, n):
        """An int in [0, n)."""
        return self.next() % n


class FileSource:
    """Samples of a binary EPSD file, read row by row on demand."""

    def __init__(self, path, seed=1):
        try:
            self.f = open(path, "rb")
        except OSError as exc:
            if exc.args and exc.args[0] == 2:  # ENOENT: say which file
                raise ValueError("data file not found: " + path) from None
            raise
        head = self.f.read(HEADER_LEN)
        if len(head) != HEADER_LEN:
            self.f.close()
            raise ValueError(path + ": too short for a data header")
        magic, version, kind, nf, ns = struct.unpack(HEADER, head)
        if magic != MAGIC or version != 1 or kind not in (0, 1) or nf < 1:
            self.f.close()
            raise ValueError(
                path + ": not an EPSD v1 data file (a CSV needs a .csv name)"
            )
        self.f.seek(0, 2)
        size = self.f.tell()
        self.row_bytes = 4 * (nf + 1)
        if ns < 1 or size != HEADER_LEN + ns * self.row_bytes:
            self.f.close()
            raise ValueError(path + ": sample count does not match the file size")
        self.n_features = nf
        self.n_samples = ns
        self.label_kind = kind
        self.rng = XorShift(seed)
        # features are read straight into the caller's float buffer (all
        # supported boards are little-endian), the label through 4 bytes here
        self._label = bytearray(4)

    def count(self):
        return self.n_samples

    def draw(self, n):
        """How many rows a batch of n has (then sampled by ``rows``): n."""
        return n

    def batch(self, X, y, n):
        """Sample n rows with replacement into X, y; return n."""
        nf = self.n_features
        xv = memoryview(X)
        lab = self._label
        fmt = "<i" if self.label_kind == LABEL_INT else "<f"
        for r in range(n):
            j = self.rng.below(self.n_samples)
            self.f.seek(HEADER_LEN + j * self.row_bytes)
            got = self.f.readinto(xv[r * nf : (r + 1) * nf])
            if got != 4 * nf or self.f.readinto(lab) != 4:
                raise OSError("data file shrank while reading")
            y[r] = struct.unpack_from(fmt, lab, 0)[0]
        return n

    rows = batch

    def close(self):
        self.f.close()
