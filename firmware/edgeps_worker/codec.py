"""The board's number formats (PROTOCOL.md dtypes): UPDATE encoders, PARAMS decoders.

F32 is the float32 vector itself. F16 is IEEE halves, round to nearest even,
saturating at +-65504 (the rules of ``eps_fp16_quantize``). I8 is blocks of
128: a float32 scale (max|v| / 127), then one int8 per value, q =
round-half-away(v * (127 / max|v|)) as float32 arithmetic does it (the rules
of ``eps_int8_quantize``); a block with max|v| < 1e-30 is all zeros, scale 0.

Memory: an encoded UPDATE is written over the gradient buffer it encodes
(its bytes are never longer than the float32 vector once n >= 2, and each
value is read before its bytes are overwritten), so no second vector is
held. I8 keeps error feedback: the residual (n float32, taken at the first
I8 step) is added to the next gradient and becomes what was not sent. F16
has none: its relative error is 2**-11 (int8's is up to 1/254 of a block's
largest value), and a residual would cost the board 4 bytes a parameter.

Bit exactness: float32 operations are rounded to float32 after each step by
storing them in an array('f'): on the ESP32 Python floats are float32; on
the 64-bit unix port they are doubles, whose 53 bits make a double result
rounded to float32 the correctly rounded float32 result (+, -, *, /).
The half conversions and the scans for NaN/Inf and block maxima only move
bits, in viper (no boxed floats); CPython runs the same code on memoryviews.
"""

import struct
from array import array

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr8(buf):
        return memoryview(buf).cast("B")

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
_SCALE_MAX = 3.4028234e38 / 127  # largest scale whose q * scale stays finite


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
def _nonfinite32(buf, n: int) -> int:
    """How many of buf's first n float32 are NaN or Inf."""
    p = ptr32(buf)
    one = 1  # 0x7FFFFFFF and 0x7F800000 from small ints (viper on 32-bit ports)
    absm = (one << 31) - 1
    inf = (absm >> 23) << 23
    bad = 0
    for i in range(n):
        if (p[i] & absm) >= inf:
            bad += 1
    return bad


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


@micropython.viper
def _half_bad(src, so: int, n: int) -> int:
    """How many of the n little-endian halves at src[so:] are NaN or Inf."""
    s = ptr8(src)
    bad = 0
    for i in range(n):
        if (s[so + 2 * i + 1] & 0x7C) == 0x7C:
            bad += 1
    return bad


@micropython.viper
def _from_half(src, so: int, n: int, dst, do: int):
    """dst[do + i] = float32 of the little-endian half at src[so + 2i] (finite)."""
    s = ptr8(src)
    d = ptr32(dst)
    for i in range(n):
        j = so + 2 * i
        v = s[j] | (s[j + 1] << 8)
        sign = (v & 0x8000) << 16
        e = (v >> 10) & 0x1F
        m = v & 0x3FF
        if e != 0:
            r = ((e + 112) << 23) | (m << 13)
        elif m == 0:
            r = 0
        else:
            # m * 2**-24: normalize the subnormal's top bit to 2**23
            t = 23
            while m < 0x800000:
                m = m << 1
                t -= 1
            r = ((t + 103) << 23) | (m & 0x7FFFFF)
        d[do + i] = sign | r


@micropython.viper
def _nonfinite8(src, n: int) -> int:
    """How many of the n little-endian float32 at src are NaN or Inf."""
    s = ptr8(src)
    bad = 0
    for i in range(n):
        j = 4 * i
        if (s[j + 3] & 0x7F) == 0x7F and (s[j + 2] & 0x80):
            bad += 1
    return bad


class GradCodec:
    """Encodes one trainer's gradient buffer (array('f') of n) per step."""

    def __init__(self, n):
        self.n = n
        self.residual = None  # taken at the first I8 step
        nb = (n + BLOCK - 1) // BLOCK
        self._amax = array("f", bytes(4 * nb))
        self._f = array("f", [0.0])  # rounds a result to float32

    def reset(self):
        """Forget what error feedback has not sent (e.g. for a new job)."""
        r = self.residual
        if r is not None:
            for i in range(self.n):
                r[i] = 0.0

    def encode(self, code, grad, view):
        """The UPDATE body of ``grad`` in ``code``: a view of grad's own bytes.

        ``view`` is grad's bytes (wire.byte_view). ValueError, before anything
        is written or the residual changes, if the gradient holds NaN or Inf;
        the gradient itself is spent (overwritten) by F16 and I8.
        """
        n = self.n
        if code == F32:
            if _nonfinite32(grad, n):
                raise ValueError("gradient holds NaN or Inf")
            return view
        if code == F16:
            if _nonfinite32(grad, n):
                raise ValueError("gradient holds NaN or Inf")
            _to_half(grad, n)
            return view[0 : 2 * n]
        if code != I8:
            raise ValueError("cannot encode dtype " + str(code))
        if _nonfinite32(grad, n):
            raise ValueError("gradient holds NaN or Inf")
        size = encoded_len(I8, n)
        body = view if size <= 4 * n else memoryview(bytearray(size))
        return self._int8(grad, body)[0:size]

    def _int8(self, g, body):
        n = self.n
        res = self.residual
        if res is None:
            res = self.residual = array("f", bytes(4 * n))
        f = self._f
        # v = grad + residual as float32, in the gradient buffer; refused if
        # the sum overflowed (the residual is still untouched)
        for i in range(n):
            g[i] += res[i]
        amax = self._amax
        if _block_max(g, n, amax):
            raise ValueError("gradient plus residual holds NaN or Inf")
        nb = len(amax)
        for k in range(nb):
            a = amax[k]
            if a < _TINY:
                a = 0.0
            f[0] = a / 127.0
            scale = f[0]
            inv = 0.0
            if a > 0.0:
                f[0] = 127.0 / a
                inv = f[0]
            b0 = k * BLOCK
            end = min(b0 + BLOCK, n)
            o = 4 * (k + 1)  # value i's int8 goes to body[o + i]
            if k == 0:
                # q0 lands on value 1's first byte: written once value 1 is read
                q0 = self._one(g, res, 0, scale, inv)
                if end > 1:
                    _quant(g, res, body, 1, end, o, scale, inv, f)
                body[o] = q0 & 255
            else:
                _quant(g, res, body, b0, end, o, scale, inv, f)
            amax[k] = scale
        # the scales last: each one's bytes held a value of an earlier block
        for k in range(nb):
            struct.pack_into("<f", body, k * (4 + BLOCK), amax[k])
        return body

    def _one(self, g, res, i, scale, inv):
        f = self._f
        v = g[i]
        f[0] = v * inv
        r = f[0]
        f[0] = r + 0.5 if r >= 0.0 else r - 0.5
        q = int(f[0])
        q = 127 if q > 127 else (-127 if q < -127 else q)
        f[0] = q * scale
        res[i] = v - f[0]
        return q


def _quant(g, res, body, lo, end, o, scale, inv, f):
    """Values lo..end-1 of g as int8 at body[o + i]; their residuals."""
    for i in range(lo, end):
        v = g[i]
        f[0] = v * inv
        r = f[0]
        if r >= 0.0:
            f[0] = r + 0.5
        else:
            f[0] = r - 0.5
        q = int(f[0])
        if q > 127:
            q = 127
        elif q < -127:
            q = -127
        body[o + i] = q & 255
        f[0] = q * scale
        res[i] = v - f[0]


def write_params(params, view, code, offset, data):
    """One PARAMS chunk (encoded byte ``offset``, bytes ``data``) into params.

    ``view`` is the parameter buffer's bytes. ValueError (nothing written) for
    a chunk that does not fit, is not whole records, or holds NaN/Inf.
    """
    size = len(data)
    n = len(params)
    rec = RECORD.get(code)
    if rec is None:
        raise ValueError("cannot decode dtype " + str(code))
    if offset < 0 or offset % rec or size == 0:
        raise ValueError("chunk offset is not a whole record")
    if code == F32:
        if size % 4 or offset + size > 4 * n:
            raise ValueError("F32 chunk does not fit the parameters")
        if _nonfinite8(data, size // 4):
            raise ValueError("PARAMS chunk holds NaN or Inf")
        view[offset : offset + size] = data
        return
    if code == F16:
        first = offset // 2
        m = size // 2
        if size % 2 or first + m > n:
            raise ValueError("F16 chunk does not fit the parameters")
        if _half_bad(data, 0, m):
            raise ValueError("PARAMS chunk holds NaN or Inf")
        _from_half(data, 0, m, params, first)
        return
    first = offset // rec * BLOCK
    full, tail = divmod(size, rec)
    count = full * BLOCK + (tail - 4 if tail else 0)
    if (tail and tail <= 4) or first + count > n or (tail and first + count != n):
        raise ValueError("I8 chunk does not fit the parameters")
    scales = []
    for j in range(0, size, rec):
        s = struct.unpack_from("<f", data, j)[0]
        if not abs(s) <= _SCALE_MAX:  # NaN, Inf, or q * scale past float32
            raise ValueError("PARAMS chunk holds a scale out of range")
        scales.append(s)
    k = first
    for b in range(len(scales)):
        s = scales[b]
        j = b * rec + 4
        for t in range(j, min(j + BLOCK, size)):
            q = data[t]
            params[k] = (q - 256 if q > 127 else q) * s
            k += 1
