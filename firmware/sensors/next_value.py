"""Sensor module, self-supervised: predict a sensor's next reading from its last K.

Copy it next to the board's config as ``next_value.py`` and set
``"sensor": "next_value"`` with ``"model": "linear:8"`` (K = 8, a regression).
No one labels anything: the features are the last K readings (oldest
first) and the label is the reading that follows them. The first K
readings only fill the window (no label, None). In inference mode the board
publishes the value the model expected for each new reading from the K
before it: far from the reading, it is a surprise (an anomaly score).

The reading is an ADC pin as a fraction of full scale (0..1); change
``ADC_PIN``, or give ``NextValue`` any ``sample() -> float`` (None: no
reading).
"""

from array import array

K = 8
ADC_PIN = 34


class NextValue:
    """A window of the last k readings of ``sample()``."""

    def __init__(self, sample, k=K):
        self.sample = sample
        self.k = k
        self.window = array("f", bytes(4 * (k + 1)))  # k features, then the label
        self.seen = 0

    def read(self, xbuf):
        """The last k readings into xbuf; the one after them; None while filling."""
        v = self.sample()
        if v is None:
            return None
        w, k = self.window, self.k
        for i in range(k):
            w[i] = w[i + 1]
        w[k] = v
        self.seen += 1
        if self.seen <= k:
            return None
        for i in range(k):
            xbuf[i] = w[i]
        return w[k]


_sensor = None


def read(xbuf):
    """The board's sensor interface; the ADC is set up on the first reading."""
    global _sensor
    if _sensor is None:
        from machine import ADC, Pin

        adc = ADC(Pin(ADC_PIN))
        _sensor = NextValue(lambda: adc.read_u16() / 65535)
    return _sensor.read(xbuf)
