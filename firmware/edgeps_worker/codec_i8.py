"""I8 with error feedback in viper: float32 arithmetic done on the bits, no boxed float.

The host's rules (``eps_int8_quantize``), step by step in float32 with
round to nearest even: v = g + r; q = trunc(v * inv + copysign(0.5)),
clipped to +-127 (inv = 127 / max|v| of the block); residual v - q * scale.
Here each float32 operation is done on integer mantissas and exponents and
rounded as IEEE does, so the bytes are the host's on every port (viper ints
are 32 bits on the ESP32: every product is split to fit). v - q * scale is
exact but at the edges (Sterbenz: the two are within a factor 2 when q != 0),
rounded where it is not.

A residual kept as int8 ("i8") is in steps of 2**(e - 7), e the exponent of
the block's scale: a power of two, so keeping and adding it back are exact
shifts; what it loses is at most half a step, under 1/256 of the scale.
On CPython the same code runs as Python over memoryviews.
"""

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr8(buf):
        return memoryview(buf).cast("B")

    def ptr32(buf):
        mv = memoryview(buf).cast("B")
        return mv[: len(mv) // 4 * 4].cast("I")  # viper's view: whole words


@micropython.viper
def fold(g, rb, b0: int, m: int, keep: int, rexp: int):
    """g[b0 + j] = float32(g[b0 + j] + residual j) for j < m (round to nearest even).

    keep 0: rb holds float32; keep 1: int8 steps of 2**rexp (rexp -999: zeros).
    """
    pg = ptr32(g)
    pf = ptr32(rb)
    p8 = ptr8(rb)
    one = 1
    for j in range(m):
        x = pg[b0 + j]
        # y = (sign, mantissa, exponent of its last bit)
        if keep == 0:
            y = pf[j]
            sy = (y >> 31) & 1
            ey = (y >> 23) & 255
            my = y & 0x7FFFFF
            if ey == 0:
                ey = -149
            else:
                my = my | 0x800000
                ey = ey - 150
        else:
            q = p8[j]
            if rexp == -999 or q == 0:
                continue
            sy = 0
            if q > 127:
                q = 256 - q
                sy = 1
            my = q
            ey = rexp
            while my < 0x800000 and ey > -149:
                my = my << 1
                ey -= 1
        if my == 0:
            continue
        sx = (x >> 31) & 1
        ex = (x >> 23) & 255
        mx = x & 0x7FFFFF
        if ex == 0:
            ex = -149
        else:
            mx = mx | 0x800000
            ex = ex - 150
        if mx == 0:
            # 0 + y: y as float32 (keep 1 values are exact float32)
            e = ey + 150
            if my < 0x800000:
                pg[b0 + j] = (sy << 31) | my
            else:
                pg[b0 + j] = (sy << 31) | (e << 23) | (my & 0x7FFFFF)
            continue
        # order by magnitude: |x| >= |y|
        if ey > ex or (ey == ex and my > mx):
            t = mx
            mx = my
            my = t
            t = ex
            ex = ey
            ey = t
            t = sx
            sx = sy
            sy = t
        big = mx << 3
        small = my << 3
        d = ex - ey
        if d > 26:
            small = 1
        elif d > 0:
            st = 0
            if small & ((one << d) - 1):
                st = 1
            small = (small >> d) | st
        if sx == sy:
            s = big + small
        else:
            s = big - small
        if s == 0:
            pg[b0 + j] = 0
            continue
        e = ex - 3  # exponent of s's last bit
        if s >= 0x8000000:
            s = (s >> 1) | (s & 1)
            e += 1
        while s < 0x4000000 and e + 153 > 1:
            s = s << 1
            e -= 1
        r = s & 7
        mm = s >> 3
        if r > 4 or (r == 4 and (mm & 1)):
            mm += 1
            if mm == 0x1000000:
                mm = 0x800000
                e += 1
        be = e + 153
        if mm < 0x800000:
            bits = mm
        elif be >= 255:
            bits = 255
            bits = bits << 23  # inf: refused by the block scan that follows
        else:
            bits = (be << 23) | (mm & 0x7FFFFF)
        pg[b0 + j] = (sx << 31) | bits


@micropython.viper
def quant(g, rb, body, lo: int, end: int, o: int, b0: int, si, keep: int) -> int:
    """g[lo:end] as int8 at body[o + i]; the residuals into rb[i - b0].

    si: array('f') [scale, inv] of the block. keep 0: rb float32; keep 1:
    int8 steps of 2**e, e returned (-999 for a block of scale 0).
    """
    pg = ptr32(g)
    pb = ptr8(body)
    pf = ptr32(rb)
    p8 = ptr8(rb)
    ps = ptr32(si)
    sb = ps[0]
    ib = ps[1]
    es = (sb >> 23) & 255
    ms = (sb & 0x7FFFFF) | 0x800000
    ei = (ib >> 23) & 255
    mi = (ib & 0x7FFFFF) | 0x800000
    rexp = -999
    if es != 0:
        rexp = es - 127 - 7
    a = mi >> 12
    c = mi & 4095
    for i in range(lo, end):
        v = pg[i]
        sv = (v >> 31) & 1
        ev = (v >> 23) & 255
        mv = (v & 0x7FFFFF) | 0x800000
        q = 0
        if ev != 0 and ei != 0 and ev + ei >= 252 - 2:
            # r1 = float32(|v| * inv) = mm * 2**k
            b = mv >> 12
            dd = mv & 4095
            lo2 = dd * c
            mid = b * c + dd * a + (lo2 >> 12)
            hi = b * a + (mid >> 12)
            rest = ((mid & 4095) << 12) | (lo2 & 4095)
            k = ev + ei - 300 + 24
            if hi >= 0x800000:
                mm = hi
                half = 0x800000
            else:
                mm = (hi << 1) | (rest >> 23)
                rest = rest & 0x7FFFFF
                half = 0x400000
                k -= 1
            if rest > half or (rest == half and (mm & 1)):
                mm += 1
                if mm == 0x1000000:
                    mm = 0x800000
                    k += 1
            # q = trunc(float32(r1 + 0.5))
            if k == -25:
                if mm == 0xFFFFFF:
                    q = 1
            elif k >= -24:
                if k + 24 > 7 or (k + 24 == 7 and mm >= 0xFF0000):
                    q = 127
                else:
                    s = (mm << (k + 24)) + 0x800000  # r1 + 0.5 in units of 2**-24
                    t = s >> 25
                    ee = 0  # s in [2**(24 + ee), 2**(25 + ee))
                    while t != 0:
                        t = t >> 1
                        ee += 1
                    u = ee + 1
                    qt = s >> u
                    rm = s & ((1 << u) - 1)
                    hf = 1 << (u - 1)
                    if rm > hf or (rm == hf and (qt & 1)):
                        qt += 1
                    q = qt >> (23 - ee)
                    if q > 127:
                        q = 127
        pb[o + i] = (0 - q if sv else q) & 255
        # the residual d = v - float32(q * scale), exact; as (sign, m, e)
        if q == 0:
            if keep == 0:
                pf[i - b0] = v
                continue
            sd = sv
            md = v & 0x7FFFFF
            ed = -149
            if ev != 0:
                md = mv
                ed = ev - 150
        else:
            pq = q * ms  # < 2**31
            ep = es - 150
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
            ex = ev - 150
            xm = mv
            if ex > ep:
                xm = xm << (ex - ep)
                ed = ep
            else:
                pq = pq << (ep - ex)
                ed = ex
            md = xm - pq
            sd = sv
            if md < 0:
                md = 0 - md
                sd = 1 - sv
        if keep == 0:
            if md == 0:
                pf[i - b0] = 0
                continue
            t = md >> 24
            sh = 0
            while t != 0:
                t = t >> 1
                sh += 1
            if sh:  # round to nearest even (exact when Sterbenz applies)
                rm = md & ((1 << sh) - 1)
                hf = 1 << (sh - 1)
                md = md >> sh
                ed += sh
                if rm > hf or (rm == hf and (md & 1)):
                    md += 1
                    if md == 0x1000000:
                        md = 0x800000
                        ed += 1
            while md < 0x800000 and ed > -149:
                md = md << 1
                ed -= 1
            if md < 0x800000:
                pf[i - b0] = (sd << 31) | md
            else:
                pf[i - b0] = (sd << 31) | ((ed + 150) << 23) | (md & 0x7FFFFF)
            continue
        # keep 1: round(d / 2**rexp), half away from zero
        rq = 0
        if rexp != -999 and md != 0:
            sh = rexp - ed
            if sh > 30:
                rq = 0
            elif sh > 0:
                rq = (md + (1 << (sh - 1))) >> sh
            elif sh > -8:
                rq = md << (0 - sh)
            else:
                rq = 127
            if rq > 127:
                rq = 127
        p8[i - b0] = (0 - rq if sd else rq) & 255
    return rexp
