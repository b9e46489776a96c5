"""Windows of a sensor's samples for a conv1d board: a ring of the last L samples.

A conv board's sensor module reads ONE sample at a time (``read(xbuf)``
fills C channels, returns its label or None), as a sensor gives them;
``Windows.read`` keeps the last L in a ring and hands out a window (C x L,
channel first, as the model takes it) once every ``stride`` new samples, so
training (``ring.SensorSource``) and inference (``infer``) take windows
through the same ``read(xbuf)`` as any sensor. A window never spans a change
of label: the ring starts again at one. Loaded only on such a board.
"""

from array import array


class Windows:
    """The last ``length`` samples of ``channels`` values; a window per ``stride``."""

    def __init__(self, read, channels, length, stride):
        if channels < 1 or length < 1 or stride < 1:
            raise ValueError("channels, window length and stride must be positive")
        self.read_sample = read
        self.c, self.n, self.stride = channels, length, stride
        self.ring = array("f", range(channels * length))  # sample-major
        self.x = array("f", range(channels))
        self.head = 0  # next slot
        self.count = 0  # samples in the ring (at most length)
        self.since = 0  # samples since the last window
        self.label = None

    def read(self, xbuf):
        """Read samples until a window is due, copy it into xbuf (C*L floats)
        and return its label; None as soon as the sensor has no sample."""
        c, n = self.c, self.n
        ring, x = self.ring, self.x
        while True:
            lab = self.read_sample(x)
            if lab is None:
                return None
            if lab != self.label:  # a new label: its windows start here
                self.label = lab
                self.count = self.since = 0
            o = self.head * c
            for j in range(c):
                ring[o + j] = x[j]
            self.head = (self.head + 1) % n
            if self.count < n:
                self.count += 1
            self.since += 1
            if self.count == n and self.since >= self.stride:
                self.since = 0
                break
        h = self.head  # the oldest sample
        for t in range(n):
            o = ((h + t) % n) * c
            for j in range(c):
                xbuf[j * n + t] = ring[o + j]
        return lab


def sensor_read(read, spec, stride):
    """The ``read(xbuf)`` a board hands its source: windows of one-sample reads
    for a conv1d spec (stride 0: the window's length), else ``read`` itself."""
    if not spec.startswith("conv1d:"):
        return read
    c, n = spec[7:].split("-")[0].split("x")
    c, n = int(c), int(n)
    return Windows(read, c, n, stride or n).read
