"""Local training data for a worker: a bounded ring of labeled samples, file sources.

Every source offers ``n_features``, ``count()`` and ``batch(X, y, n) -> rows``
which samples up to n rows (with a seeded xorshift, so CPython and MicroPython
draw the same rows) into caller-owned buffers: ``X`` is array('f') of
n * n_features, ``y`` an array of n labels ('i' class ids or 'f' targets).

Binary file format (little-endian): magic b"EPSD", u8 version 1, u8 label kind
(0: int32 class ids, 1: float32 targets), u16 n_features, u32 n_samples, then
per sample n_features float32 followed by the label (int32 or float32). A file
is read a row at a time with seek + readinto, so RAM use stays one batch.
CSV files and writing EPSD files live in ``datafile`` (not needed on a board
that trains from a binary file or a sensor, so their code stays off the heap).
"""

import struct
from array import array

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


class RingBuffer:
    """The last ``capacity`` labeled samples, stored in two preallocated arrays.

    On a board a sensor callback fills it as readings come; training samples
    minibatches from whatever it holds.
    """

    def __init__(self, capacity, n_features, label_kind=LABEL_INT, seed=1):
        if capacity < 1 or n_features < 1:
            raise ValueError("capacity and n_features must be positive")
        if label_kind not in (LABEL_INT, LABEL_FLOAT):
            raise ValueError("label_kind must be LABEL_INT or LABEL_FLOAT")
        self.capacity = capacity
        self.n_features = n_features
        self.label_kind = label_kind
        self.X = array("f", bytes(4 * capacity * n_features))
        self.y = array("i" if label_kind == LABEL_INT else "f", bytes(4 * capacity))
        self.head = 0  # next slot to write
        self.size = 0
        self.added = 0
        self.rng = XorShift(seed)

    def count(self):
        return self.size

    def add(self, features, label):
        """Store one sample (features: a sequence of n_features numbers)."""
        if len(features) != self.n_features:
            raise ValueError("sample must have n_features values")
        base = self.head * self.n_features
        for i in range(self.n_features):
            v = float(features[i])
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError("sample features must be finite")
            self.X[base + i] = v
        self.y[self.head] = int(label) if self.label_kind == LABEL_INT else label
        self.head = (self.head + 1) % self.capacity
        if self.size < self.capacity:
            self.size += 1
        self.added += 1

    def batch(self, X, y, n):
        """Sample min(n, count) rows with replacement into X, y; return that count."""
        k = n if n < self.size else self.size
        nf = self.n_features
        src = self.X
        for r in range(k):
            j = self.rng.below(self.size)
            s0 = j * nf
            d0 = r * nf
            for i in range(nf):
                X[d0 + i] = src[s0 + i]
            y[r] = self.y[j]
        return k


class SensorSource:
    """A ring buffer fed by a reading callback (ADC, I2C, ...).

    ``read(xbuf) -> label or None`` fills xbuf (array('f') of n_features) with
    one reading and returns its label, or None when no labeled sample is ready.
    ``fill(k)`` takes up to k readings; ``batch`` first takes ``per_batch``.
    """

    def __init__(self, read, n_features, capacity=64, label_kind=LABEL_INT, seed=1):
        self.read = read
        self.ring = RingBuffer(capacity, n_features, label_kind, seed)
        self.n_features = n_features
        self.label_kind = label_kind
        self._x = array("f", bytes(4 * n_features))
        self.per_batch = 1
        self.bad_readings = 0

    def count(self):
        return self.ring.size

    def fill(self, k):
        """Read up to k samples; return how many were stored."""
        got = 0
        for _ in range(k):
            label = self.read(self._x)
            if label is None:
                break
            try:
                self.ring.add(self._x, label)
            except ValueError:
                self.bad_readings += 1  # a glitchy reading is dropped, not fatal
                continue
            got += 1
        return got

    def batch(self, X, y, n):
        self.fill(self.per_batch)
        return self.ring.batch(X, y, n)


class FileSource:
    """Samples of a binary EPSD file, read row by row on demand."""

    def __init__(self, path, seed=1):
        self.f = open(path, "rb")
        head = self.f.read(HEADER_LEN)
        if len(head) != HEADER_LEN:
            self.f.close()
            raise ValueError(path + ": too short for a data header")
        magic, version, kind, nf, ns = struct.unpack(HEADER, head)
        if magic != MAGIC or version != 1 or kind not in (0, 1) or nf < 1:
            self.f.close()
            raise ValueError(path + ": not an EPSD v1 data file")
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

    def close(self):
        self.f.close()
