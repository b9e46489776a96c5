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
def pool_arg(x, xo: int, xrow: int, C: int, k: int, s: int, P: int, out, oo: int,
             orow: int, arg, masked: int):  # fmt: skip
    """Max pooling of P windows a channel: out[oo + c*orow + o] = the largest
    x[xo + c*xrow + o*s + j], j < k; arg (bytes, same index) = the first such
    j, or 255 when ``masked`` (a ReLU output) and that maximum is not > 0."""
    px = ptr32(x)
    po = ptr32(out)
    pa = ptr8(arg)
    one = 1
    sgn = one << 31
    for c in range(C):
        for o in range(P):
            base = xo + c * xrow + o * s
            best = 0
            v = px[base]
            kb = v
            if kb & sgn:
                kb = 0 - (kb & (sgn - 1))
            for j in range(1, k):
                w = px[base + j]
                kv = w
                if kv & sgn:
                    kv = 0 - (kv & (sgn - 1))
                if kv > kb:
                    kb = kv
                    best = j
                    v = w
            i = oo + c * orow + o
            po[i] = v
            if masked and kb <= 0:
                best = 255
            pa[i] = best


@micropython.viper
def unpool(dy, do: int, drow: int, C: int, s: int, P: int, arg, out, oo: int,
           orow: int):  # fmt: skip
    """out[oo + c*orow + o*s + arg] = dy[do + c*drow + o] for P windows a
    channel whose arg (indexed as dy) is not 255; out is zeroed before."""
    pd = ptr32(dy)
    pa = ptr8(arg)
    po = ptr32(out)
    for c in range(C):
        for o in range(P):
            i = do + c * drow + o
            a = pa[i]
            if a != 255:
                po[oo + c * orow + o * s + a] = pd[i]
