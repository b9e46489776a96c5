"""A sensor module whose driver runs out of heap on its 8th reading."""

_n = [0]


def read(xbuf):
    """Readings like fw_sensor's, then MemoryError (a board heap too small)."""
    k = _n[0]
    _n[0] = k + 1
    if k >= 7:
        raise MemoryError("memory allocation failed, allocating 4096 bytes")
    for i in range(len(xbuf)):
        xbuf[i] = ((k * 7 + i * 3) % 11 - 5) / 5.0
    return 1 if xbuf[0] > 0 else 0
