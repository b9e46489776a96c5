"""A sensor whose readings take 4 s each after the first five: long steps.

The worker takes one reading per step, so each step outlasts a 2 s liveness
timeout on the host, like a big model on a slow board.
"""

import time

_n = [0]


def read(xbuf):
    """Readings like fw_sensor's, slow after start-up."""
    k = _n[0]
    _n[0] = k + 1
    if k >= 5:
        time.sleep_ms(4000)  # type: ignore[attr-defined]
    for i in range(len(xbuf)):
        xbuf[i] = ((k * 7 + i * 3) % 11 - 5) / 5.0
    return 1 if xbuf[0] > 0 else 0
