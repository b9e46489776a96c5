"""Millisecond ticks that wrap: time.ticks_* on MicroPython, monotonic on CPython."""

import time

try:
    ticks_ms = time.ticks_ms  # type: ignore[attr-defined]
    ticks_diff = time.ticks_diff  # type: ignore[attr-defined]
    sleep_ms = time.sleep_ms  # type: ignore[attr-defined]
except AttributeError:

    def ticks_ms():
        """Milliseconds from an arbitrary origin (CPython: time.monotonic)."""
        # CPython only; the board stubs rightly lack time.monotonic
        return int(time.monotonic() * 1000)  # type: ignore[attr-defined]

    def ticks_diff(a, b):
        """a - b in milliseconds (CPython ints do not wrap)."""
        return a - b

    def sleep_ms(ms):
        """Sleep for ms milliseconds."""
        if ms > 0:
            time.sleep(ms / 1000)


# 2024-01-01 UTC in this port's epoch (2000 on the ESP32, 1970 elsewhere)
EPOCH_2024 = 1704067200 - (946684800 if time.gmtime(0)[0] == 2000 else 0)


def tenths_since_2024():
    """Tenths of a second since 2024 (32-bit), or 0 when the clock was never set.

    Worker incarnations use it: it grows across restarts, as the host requires.
    """
    now = time.time()
    if now <= EPOCH_2024:
        return 0
    return int((now - EPOCH_2024) * 10) & 0xFFFFFFFF
