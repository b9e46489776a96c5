"""PARAMS decoding on the board: F32, F16, I8 chunks into the float32 parameters.

The layouts are ``edgeps_worker.codec``'s (PROTOCOL.md dtypes); F32 is a
plain copy (the worker's ParamsSink copies F32 itself). Loaded at the first
F16 or I8 chunk: on MicroPython a module's code takes heap. Decoded values are the
host's ``fp16_dequantize`` / ``int8_dequantize`` bit for bit: halves widen
exactly and q * scale is rounded as a float32 product is, both on the bits
in viper (no boxed float).
"""

import struct

from edgeps_worker.wire import byte_view

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr8(buf):
        return memoryview(buf).cast("B")

    def ptr32(buf):
        return memoryview(buf).cast("B").cast("I")


F32 = 1
F16 = 2
I8 = 3
BLOCK = 128
RECORD = {F32: 4, F16: 2, I8: 4 + BLOCK}
_SCALE_MAX = 3.4028234e38 / 127  # largest scale whose q * scale stays finite
_SCALE_MIN = 1.1754944e-38  # the smallest normal float32


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
def _from_i8(src, at: int, m: int, dst, do: int):
    """dst[do + j] = float32(q_j * scale) for the I8 block at src[at:] (m values).

    The scale is 0 or normal (checked before); q * scale is exact in 31 bits,
    then rounded to nearest even, as a float32 product is.
    """
    s = ptr8(src)
    d = ptr32(dst)
    sb = s[at] | (s[at + 1] << 8) | (s[at + 2] << 16) | (s[at + 3] << 24)
    ss = (sb >> 31) & 1
    es = (sb >> 23) & 255
    ms = (sb & 0x7FFFFF) | 0x800000
    for j in range(m):
        q = s[at + 4 + j]
        sq = 0
        if q > 127:
            q = 256 - q
            sq = 1
        sign = (sq ^ ss) << 31
        if q == 0 or es == 0:
            d[do + j] = sign  # a signed zero, as q * scale gives
            continue
        pq = q * ms  # < 2**31
        ep = es
        t = pq >> 24
        sh = 0
        while t != 0:
            t = t >> 1
            sh += 1
        if sh:
            rm = pq & ((1 << sh) - 1)
            hf = 1 << (sh - 1)
            pq = pq >> sh
            ep += sh
            if rm > hf or (rm == hf and (pq & 1)):
                pq += 1
                if pq == 0x1000000:
                    pq = 0x800000
                    ep += 1
        d[do + j] = sign | (ep << 23) | (pq & 0x7FFFFF)


def write_params(params, code, offset, data):
    """One PARAMS chunk (encoded byte ``offset``, bytes ``data``) into params.

    ValueError (nothing written) for a chunk that does not fit, is not whole
    records, or holds NaN/Inf.
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
        byte_view(params)[0][offset : offset + size] = data
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
    for j in range(0, size, rec):
        s = abs(struct.unpack_from("<f", data, j)[0])
        # NaN, Inf, q * scale past float32, or a scale no encoder makes (not 0
        # and under 1e-30 / 127: subnormal)
        if not s <= _SCALE_MAX or 0.0 < s < _SCALE_MIN:
            raise ValueError("PARAMS chunk holds a scale out of range")
    k = first
    for j in range(0, size, rec):
        m = min(BLOCK, size - j - 4)
        _from_i8(data, j, m, params, k)
        k += m
