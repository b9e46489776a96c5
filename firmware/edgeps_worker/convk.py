"""Viper helpers of the board's conv network: copies, masks and pools on float32 bits.

The products themselves run in ``blockfp.matmul``; what is left here moves
float32 bits without computing a float (viper has none, and a boxed float
is a heap block): im2col windows with zero padding, a bias fill, ReLU, a
ReLU mask kept in bytes, and max pooling (the gradient goes to the first
maximum, the host's rule). On CPython ``ptr32``/``ptr8`` are memoryviews
and the same code runs as Python.
"""

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr32(buf):
        """The buffer's bytes as unsigned 32-bit words, as viper's ptr32 sees them."""
        return memoryview(buf).cast("B").cast("I")

    def ptr8(buf):
        """The buffer's bytes, as viper's ptr8 sees them."""
        return memoryview(buf).cast("B")


@micropython.viper
def im2col(x, xo: int, cs: int, L: int, C: int, K: int, s: int, p: int, t0: int,
           T: int, cols):  # fmt: skip
    """cols[t*C*K + c*K + j] = x[xo + c*cs + t'*s + j - p] for t' = t0 + t < t0 + T,
    0 where the tap falls in the padding."""
    px = ptr32(x)
    pc = ptr32(cols)
    i = 0
    for t in range(t0, t0 + T):
        start = t * s - p
        for c in range(C):
            base = xo + c * cs
            for j in range(K):
                u = start + j
                v = 0
                if u >= 0 and u < L:
                    v = px[base + u]
                pc[i] = v
                i += 1


@micropython.viper
def fill_bias(out, N: int, Lo: int, b, bo: int):
    """out[n*Lo + t] = b[bo + n]: a conv layer's outputs start at its bias."""
    po = ptr32(out)
    pb = ptr32(b)
    i = 0
    for n in range(N):
        v = pb[bo + n]
        for _t in range(Lo):
            po[i] = v
            i += 1


@micropython.viper
def relu(buf, n: int):
    """max(v, 0) for buf[:n] (the sign bit set: 0; -0.0 too)."""
    pb = ptr32(buf)
    one = 1
    sgn = one << 31
    for i in range(n):
        if pb[i] & sgn:
            pb[i] = 0


@micropython.viper
def zero(buf, o: int, n: int):
    """buf[o:o + n] = 0."""
    pb = ptr32(buf)
    for i in range(o, o + n):
        pb[i] = 0


@micropython.viper
def keep_mask(buf, n: int, mask):
    """mask[i] = 1 where buf[i] > 0 (a ReLU output: its gradient passes), else 0."""
    pb = ptr32(buf)
    pm = ptr8(mask)
    one = 1
    sgn = one << 31
    for i in range(n):
        v = pb[i]
        m = 0
        if v != 0 and (v & sgn) == 0:
            m = 1
        pm[i] = m


@micropython.viper
def apply_mask(buf, n: int, mask):
    """buf[i] = 0 where mask[i] is 0."""
    pb = ptr32(buf)
    pm = ptr8(mask)
    for i in range(n):
        if pm[i] == 0:
            pb[i] = 0


@micropython.viper
def maxpool(x, xo: int, cs: int, L: int, C: int, k: int, s: int, Lo: int, out):
    """out[c*Lo + o] = max of x[xo + c*cs + o*s + j], j < k."""
    px = ptr32(x)
    po = ptr32(out)
    one = 1
    sgn = one << 31
    i = 0
    for c in range(C):
        for o in range(Lo):
            base = xo + c * cs + o * s
            best = px[base]
            kb = best
            if kb & sgn:
                kb = 0 - (kb & (sgn - 1))
            for j in range(1, k):
                v = px[base + j]
                kv = v
                if kv & sgn:
                    kv = 0 - (kv & (sgn - 1))
                if kv > kb:
                    kb = kv
                    best = v
            po[i] = best
            i += 1


@micropython.viper
def maxpool_back(x, C: int, L: int, k: int, s: int, Lo: int, dy, masked: int):
    """Windows that do not overlap (s >= k): x (the pool's input) becomes its
    gradient in place: dy[c*Lo + o] at the window's first maximum (0 there
    too when ``masked`` and the maximum is not > 0), 0 everywhere else."""
    px = ptr32(x)
    pd = ptr32(dy)
    one = 1
    sgn = one << 31
    for c in range(C):
        row = c * L
        u = 0  # next position of the row not yet written
        for o in range(Lo):
            base = row + o * s
            best = 0
            kb = px[base]
            if kb & sgn:
                kb = 0 - (kb & (sgn - 1))
            for j in range(1, k):
                kv = px[base + j]
                if kv & sgn:
                    kv = 0 - (kv & (sgn - 1))
                if kv > kb:
                    kb = kv
                    best = j
            g = pd[c * Lo + o]
            if masked and kb <= 0:
                g = 0
            while u < o * s + k:
                px[row + u] = 0
                u += 1
            px[base + best] = g
        while u < L:
            px[row + u] = 0
            u += 1


@micropython.viper
def argmax_pool(x, C: int, L: int, k: int, s: int, Lo: int, arg):
    """arg[c*Lo + o] = position (in x) of window o's first maximum, as int32."""
    px = ptr32(x)
    pa = ptr32(arg)
    one = 1
    sgn = one << 31
    for c in range(C):
        for o in range(Lo):
            base = c * L + o * s
            best = 0
            kb = px[base]
            if kb & sgn:
                kb = 0 - (kb & (sgn - 1))
            for j in range(1, k):
                kv = px[base + j]
                if kv & sgn:
                    kv = 0 - (kv & (sgn - 1))
                if kv > kb:
                    kb = kv
                    best = j
            pa[c * Lo + o] = base + best
