"""A stand-in sensor module for main.py's "sensor" source: a deterministic signal."""

_n = [0]


def read(xbuf):
    """Fill xbuf with the next reading; label 1 when the first channel is high."""
    k = _n[0]
    _n[0] = k + 1
    for i in range(len(xbuf)):
        xbuf[i] = ((k * 7 + i * 3) % 11 - 5) / 5.0
    return 1 if xbuf[0] > 0 else 0
