"""PARAMS decoding on the board: F16 and I8 chunks into the float32 parameters.

The layouts are ``edgeps_worker.codec``'s (PROTOCOL.md dtypes); F32 is a
plain copy done by the trainer. Loaded only for a job whose PARAMS are F16
or I8: on MicroPython a module's code takes heap. Decoded values are the
host's ``fp16_dequantize`` / ``int8_dequantize`` bit for bit: halves widen
exactly (viper, bits only), q * scale is one float32 rounding (an exact
double product rounded on the 64-bit unix port, a float32 product on the
ESP32).
"""

import struct

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr8(buf):
        return memoryview(buf).cast("B")

    def ptr32(buf):
        return memoryview(buf).cast("B").cast("I")


F16 = 2
I8 = 3
BLOCK = 128
RECORD = {F16: 2, I8: 4 + BLOCK}
_SCALE_MAX = 3.4028234e38 / 127  # largest scale whose q * scale stays finite


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


def write_params(params, code, offset, data):
    """One F16 or I8 PARAMS chunk (encoded byte ``offset``, bytes ``data``).

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
