"""Matrix products of float32 buffers in viper, as integer block floating point.

MicroPython boxes every float it computes (a heap block per result, on the
ESP32 too), and viper has no float type, so float loops are bound by
allocation. ``matmul`` instead reads the float32 bits, aligns a row of one
operand (to its own largest exponent) and the whole other operand (to a
given one) as 23-bit mantissas, multiplies them as three 12-bit partial
products so that every intermediate fits a signed 32-bit word (viper ints
on the ESP32; the unix port's are 64 bits, CPython's unbounded), carries
every 64 terms, and writes float32 bits back, truncated: each term of a
dot product is off by less than 2**-21 of its largest possible term (the
row's and the operand's largest values multiplied), the result written
by less than 2**-23 of itself. Zeros and subnormals count as zero. No
float is boxed inside. On CPython ``ptr32`` is a uint32 memoryview and the
same code runs as Python.
"""

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr32(buf):
        """The buffer's bytes as unsigned 32-bit words, as viper's ptr32 sees them."""
        return memoryview(buf).cast("B").cast("I")


@micropython.viper
def emax(buf, off: int, n: int) -> int:
    """Largest biased float32 exponent among buf[off:off + n] (255: inf or nan)."""
    p = ptr32(buf)
    top = 0
    for i in range(off, off + n):
        e = (p[i] >> 23) & 255
        if e > top:
            top = e
    return top


@micropython.viper
def matmul(
    a,
    ao: int,
    ar: int,
    ak: int,
    ka: int,
    kn: int,
    b,
    bo: int,
    bc: int,
    bk: int,
    eb: int,
    out,
    oo: int,
    orow: int,
    mode: int,
    rows: int,
    cols: int,
    prep,
) -> int:
    """out[oo + r*orow + c] = sum_k A(r, k) * b[bo + c*bc + k*bk], for float32 buffers.

    A(r, k) is a[ao + r*ar + k*ak] for k < ka and 1.0 for ka <= k < kn (a bias
    row or a column sum); eb is the largest exponent of b's elements in use.
    mode 1 stores relu(result); mode 2 stores 0 where out already holds a
    value <= 0 (relu's gradient, in place); mode 3 adds the result to out
    (float32 addition, truncated). Returns how many results overflowed
    float32 (stored as inf) or met an inf or nan in out (mode 3).
    """
    pa = ptr32(a)
    pb = ptr32(b)
    po = ptr32(out)
    pp = ptr32(prep)
    one = 1
    sgn = one << 31
    m32 = sgn | (sgn - 1)
    inf = 255
    inf = inf << 23
    bad = 0
    for r in range(rows):
        # the row's block exponent, then the row as 23-bit mantissas + 2**23
        ea = 0
        if kn > ka:
            ea = 127
        i = ao + r * ar
        for _k in range(ka):
            e = (pa[i] >> 23) & 255
            if e > ea:
                ea = e
            i += ak
        i = ao + r * ar
        for k in range(kn):
            v = 1065353216  # 1.0
            if k < ka:
                v = pa[i]
                i += ak
            e = (v >> 23) & 255
            sh = ea + 1 - e
            m = 0
            if e != 0 and sh < 25:
                m = ((v & 0x7FFFFF) | 0x800000) >> sh
                if v & sgn:
                    m = 0 - m
            pp[k] = m + 0x800000
        for c in range(cols):
            j = bo + c * bc
            top = 0
            hh = 0
            mid = 0
            k = 0
            while k < kn:
                end = k + 64  # carry before a 32-bit accumulator can overflow
                if end > kn:
                    end = kn
                while k < end:
                    v = pb[j]
                    j += bk
                    e = (v >> 23) & 255
                    sh = eb + 1 - e
                    if e != 0 and sh < 25:
                        m = ((v & 0x7FFFFF) | 0x800000) >> sh
                        if v & sgn:
                            m = 0 - m
                        u = pp[k]
                        h1 = (u >> 12) - 2048
                        l1 = u & 4095
                        h2 = m >> 12
                        l2 = m & 4095
                        hh += h1 * h2
                        mid += h1 * l2 + l1 * h2 + ((l1 * l2) >> 12)
                    k += 1
                hh += mid >> 12
                mid &= 4095
                top += hh >> 24
                hh &= 0xFFFFFF
            # value = (top * 2**36 + hh * 2**12 + mid) * 2**(ea + eb - 286)
            idx = oo + r * orow + c
            neg = 0
            if top < 0:
                neg = 1
                mid = 0 - mid
                hh = 0 - hh
                top = 0 - top
                hh += mid >> 12
                mid &= 4095
                top += hh >> 24
                hh &= 0xFFFFFF
            x = 0
            hi = hh
            lo = mid
            if top != 0:
                hi = (top << 12) | (hh >> 12)
                lo = hh & 4095
                x = 12
            if hi == 0:
                hi = lo
                lo = 0
                x -= 12
            bits = 0
            if hi != 0:
                bl = 0
                t = hi
                if t >= 65536:
                    t = t >> 16
                    bl += 16
                if t >= 256:
                    t = t >> 8
                    bl += 8
                if t >= 16:
                    t = t >> 4
                    bl += 4
                if t >= 4:
                    t = t >> 2
                    bl += 2
                if t >= 2:
                    t = t >> 1
                    bl += 1
                bl += t
                if bl <= 12:
                    m = ((hi << 12) | lo) << (12 - bl)
                elif bl <= 24:
                    m = (hi << (24 - bl)) | (lo >> (bl - 12))
                else:
                    m = hi >> (bl - 24)
                eo = bl - 12 + x + ea + eb - 136
                if mode == 3:
                    old = po[idx]
                    eg = (old >> 23) & 255
                    if eg == 255:
                        bad += 1
                    if eg != 0:
                        # align both 24-bit mantissas to the larger exponent, add
                        mg = (old & 0x7FFFFF) | 0x800000
                        sh = eg - eo
                        if sh > 0:
                            m = m >> sh if sh < 25 else 0
                            eo = eg
                        elif sh < 0:
                            mg = mg >> (0 - sh) if sh > -25 else 0
                        if neg:
                            m = 0 - m
                        if old & sgn:
                            mg = 0 - mg
                        m += mg
                        neg = 0
                        if m < 0:
                            neg = 1
                            m = 0 - m
                        if m >= 0x1000000:
                            m = m >> 1
                            eo += 1
                        while m != 0 and m < 0x800000:
                            m = m << 1
                            eo -= 1
                        if m == 0:
                            eo = 0
                if eo >= 255:
                    bits = inf
                    bad += 1
                elif eo > 0:
                    bits = (eo << 23) | (m & 0x7FFFFF)
                if neg:
                    bits = bits | sgn
            elif mode == 3:
                bits = po[idx]
            if mode == 1:
                if neg:
                    bits = 0
            elif mode == 2:
                old = po[idx]
                if old == 0 or (old & sgn) != 0:
                    bits = 0
            po[idx] = bits & m32
    return bad
