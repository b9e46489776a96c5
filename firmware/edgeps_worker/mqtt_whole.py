"""An oversized PUBLISH read whole: a job's card longer than a board's chunk.

``MQTTClient`` imports this module only for a PUBLISH longer than its
buffer on a client given ``keep_over`` (a board whose model's scaler makes
its WELCOME longer than a chunk), and unloads it after: the code of every
connect (``mqtt_open``) stays as small as before.
"""

from edgeps_worker import mqtt_link as _l


def read(c):
    """The payload of the oversized PUBLISH whose head was just read, in a
    bytearray taken for it; None when it is longer than ``c.keep_over``, the
    heap has no block for it or ``c.timeout_ms`` passes (what is left of it
    is then drained by the next read, as for any oversized PUBLISH)."""
    n = c._skip
    if n > c.keep_over:
        return None
    try:
        big = bytearray(n)
    except MemoryError:
        return None
    t0 = _l.ticks_ms()
    at = 0
    while c._skip:
        k = min(c._skip, c._r1 - c._r0)
        big[at : at + k] = c._rmv[c._r0 : c._r0 + k]
        at += k
        c._skip -= k
        c._r0 += k
        if c._r0 == c._r1:
            c._r0 = c._r1 = 0
        if c._skip and not c._fill(min(c._skip, len(c._rbuf)), t0, c.timeout_ms):
            return None
    return big
