"""Millisecond ticks that wrap (time.ticks_* on MicroPython), and random ids."""

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


def random_u64():
    """A random non-zero 64-bit number (worker instance ids, link nonces)."""
    try:
        import os

        n = int.from_bytes(os.urandom(8), "little")
    except (ImportError, AttributeError, NotImplementedError):
        from random import getrandbits

        n = (getrandbits(32) << 32) | getrandbits(32)
    return n or 1
