"""A bounded ring of labeled samples, and the sensor source that fills one.

Used by boards that train from a sensor callback or a CSV file (``datafile``);
a board reading an EPSD file never imports it.
"""

from array import array

from edgeps_worker.data import LABEL_FLOAT, LABEL_INT, XorShift


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
        # from a range, not from zero bytes: no temporary as large as the
        # ring next to it (a CSV board's 15 KB ring needed two such holes);
        # only the ``size`` rows written are ever read
        self.X = array("f", range(capacity * n_features))
        self.y = array("i" if label_kind == LABEL_INT else "f", range(capacity))
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

    def draw(self, n):
        """How many rows a batch of n has (then sampled by ``rows``)."""
        return n if n < self.size else self.size

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

    rows = batch


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

    def draw(self, n):
        """Take this batch's readings; how many rows it has (sampled by ``rows``)."""
        self.fill(self.per_batch)
        return self.ring.draw(n)

    def rows(self, X, y, m):
        return self.ring.batch(X, y, m)
