"""The board's UPDATE encoders for the number formats of PROTOCOL.md's dtypes.

F32 is the float32 vector itself. F16 is IEEE halves, round to nearest even,
saturating at +-65504 (the rules of ``eps_fp16_quantize``). I8 is blocks of
128: a float32 scale (max|v| / 127), then one int8 per value, q =
round-half-away(v * (127 / max|v|)) as float32 arithmetic does it (the rules
of ``eps_int8_quantize``); a block with max|v| < 1e-30 is all zeros, scale 0.

Memory: an encoded UPDATE is written over the gradient buffer it encodes
(its bytes are never longer than the float32 vector once n >= 2, and each
value is read before its bytes are overwritten), so no second vector is
held. I8 keeps error feedback: the residual (n float32 in blocks, taken at the
first I8 step) is added to the next gradient and becomes what was not sent. F16
has none: its relative error is 2**-11 (int8's is up to 1/254 of a block's
largest value), and a residual would cost the board 4 bytes a parameter.

Bit exactness: float32 operations are rounded to float32 after each step by
storing them in an array('f'): on the ESP32 Python floats are float32; on
the 64-bit unix port they are doubles, whose 53 bits make a double result
rounded to float32 the correctly rounded float32 result (+, -, *, /).
The half conversion and the scans for NaN/Inf and block maxima only move
bits, in viper (no boxed floats); CPython runs the same code on memoryviews.
The trainer loads this module at a job's first F16 or I8 step (its code
takes heap); PARAMS decoding is ``codec_read``.
"""

import struct
from array import array

from edgeps_worker.blockfp import emax
from edgeps_worker.wire import byte_view

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr16(buf):
        return memoryview(buf).cast("B").cast("H")

    def ptr32(buf):
        return memoryview(buf).cast("B").cast("I")


F32 = 1
F16 = 2
I8 = 3
BLOCK = 128
RECORD = {F32: 4, F16: 2, I8: 4 + BLOCK}
MASK = (1 << F32) | (1 << F16) | (1 << I8)
_TINY = array("f", [1e-30])[0]  # float32(1e-30): a block below it is sent as 0


def encoded_len(code, n):
    """Bytes of an n-value vector in format ``code``."""
    if code == F32:
        return 4 * n
    if code == F16:
        return 2 * n
    if code == I8:
        return 4 * ((n + BLOCK - 1) // BLOCK) + n
    raise ValueError("unknown dtype " + str(code))


@micropython.viper
def _block_max(buf, n: int, out) -> int:
    """out[k] = max |buf[i]| over block k (as float32 bits); 1 if one is NaN/Inf."""
    p = ptr32(buf)
    po = ptr32(out)
    one = 1  # 0x7FFFFFFF and 0x7F800000 from small ints (viper on 32-bit ports)
    absm = (one << 31) - 1
    inf = (absm >> 23) << 23
    bad = 0
    i = 0
    k = 0
    while i < n:
        end = i + 128
        if end > n:
            end = n
        top = 0
        while i < end:
            a = p[i] & absm
            if a >= inf:
                bad = 1
            if a > top:
                top = a
            i += 1
        po[k] = top
        k += 1
    return bad


@micropython.viper
def _to_half(buf, n: int):
    """The first n float32 of buf as halves in place (half i at bytes 2i, 2i + 1)."""
    p = ptr32(buf)
    h = ptr16(buf)
    one = 1
    absm = (one << 31) - 1
    big = 0x477FF
    big = big << 12  # 65520: the first float32 that rounds past 65504
    for i in range(n):
        x = p[i]
        sign = (x >> 16) & 0x8000
        ax = x & absm
        if ax >= big:
            r = 0x7BFF  # saturate at 65504 (NaN/Inf are refused before)
        elif ax >= 0x38800000:
            r = (ax - 0x38000000 + 0x0FFF + ((ax >> 13) & 1)) >> 13
        else:
            # a half subnormal: round(|x| * 2**24), to nearest even
            e = ax >> 23
            sh = 126 - e
            r = 0
            if e != 0 and sh < 25:
                m = (ax & 0x7FFFFF) | 0x800000
                r = m >> sh
                rem = m & ((1 << sh) - 1)
                half = 1 << (sh - 1)
                if rem > half or (rem == half and (r & 1)):
                    r += 1
        h[i] = sign | r


class GradCodec:
    """Encodes one trainer's gradient buffer (array('f') of n) per step.

    ``residual``: I8's error feedback, None until the first I8 step, then one
    buffer per block of 128 values (no 4n-byte block is needed from a heap
    that has run for a while). ``keep`` says how it is kept: "f32" (4 B a
    value; the host's kernels give the same bytes) or "i8" (1 B a value:
    each residual, at most half the block's scale, in int8 steps of a power
    of two under 1/128 of the scale: error feedback loses at most half a
    step, under 1/256 of the scale, a step). See ``codec_i8``.
    """

    def __init__(self, n, keep="f32"):
        if keep not in ("f32", "i8"):
            raise ValueError("residual keep must be f32 or i8")
        self.n = n
        self.keep = 1 if keep == "i8" else 0
        self.residual = None
        nb = (n + BLOCK - 1) // BLOCK
        self._amax = array("f", bytes(4 * nb))
        self._rexp = [-999] * nb  # keep i8: each block's step exponent
        self._si = array("f", bytes(8))  # a block's scale and 127 / max|v|
        self._buf = self._view = None  # the gradient buffer and its bytes

    def reset(self):
        """Forget what error feedback has not sent (e.g. for a new job)."""
        for rb in self.residual or ():
            for j in range(len(rb)):
                rb[j] = 0

    def encode(self, code, grad):
        """The UPDATE body of ``grad`` in ``code``: a view of grad's own bytes.

        ValueError, before anything is written or the residual changes, if
        the gradient holds NaN or Inf; the gradient itself is spent
        (overwritten) by F16 and I8.
        """
        n = self.n
        view = self._view
        if grad is not self._buf or view is None:
            self._buf = grad  # the view aliases grad without holding it
            view = self._view = byte_view(grad)[0]
        if code not in RECORD:
            raise ValueError("cannot encode dtype " + str(code))
        if emax(grad, 0, n) == 255:
            raise ValueError("gradient holds NaN or Inf")
        if code == F32:
            return view
        if code == F16:
            _to_half(grad, n)
            return view[0 : 2 * n]
        size = encoded_len(I8, n)
        body = view if size <= 4 * n else memoryview(bytearray(size))
        return self._int8(grad, body)[0:size]

    def _int8(self, g, body):
        from edgeps_worker.codec_i8 import fold, quant

        n = self.n
        keep = self.keep
        res = self.residual
        if res is None:
            res = self.residual = [
                bytearray(min(BLOCK, n - b0))
                if keep
                else array("f", bytes(4 * min(BLOCK, n - b0)))
                for b0 in range(0, n, BLOCK)
            ]
        # v = grad + residual as float32, in the gradient buffer; refused if
        # the sum overflowed (the residual is still untouched)
        rexp = self._rexp
        for k in range(len(res)):
            fold(g, res[k], k * BLOCK, len(res[k]), keep, rexp[k])
        amax = self._amax
        if _block_max(g, n, amax):
            raise ValueError("gradient plus residual holds NaN or Inf")
        si = self._si
        for k in range(len(amax)):
            a = amax[k]
            if a < _TINY:
                a = 0.0
            si[0] = a / 127.0  # float32 roundings of exact double quotients
            si[1] = 127.0 / a if a > 0.0 else 0.0
            b0 = k * BLOCK
            end = min(b0 + BLOCK, n)
            o = 4 * (k + 1)  # value i's int8 goes to body[o + i]
            rb = res[k]
            if k == 0 and end > 1:
                # q0 lands on value 1's first byte: put back once value 1 is read
                v1 = g[1]
                quant(g, rb, body, 0, 1, o, 0, si, keep)
                q0 = body[o]
                g[1] = v1
                rexp[k] = quant(g, rb, body, 1, end, o, 0, si, keep)
                body[o] = q0
            else:
                rexp[k] = quant(g, rb, body, b0, end, o, b0, si, keep)
            amax[k] = si[0]
        # the scales last: each one's bytes held a value of an earlier block
        for k in range(len(amax)):
            struct.pack_into("<f", body, k * (4 + BLOCK), amax[k])
        return body
