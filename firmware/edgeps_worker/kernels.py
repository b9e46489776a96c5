"""Gradient kernels on array('f') buffers for boards: linear, logistic, softmax, MLP.

The flat parameter layout is the one of ``edgeps.kernels``: layers in order,
each W (n_in, n_out) row-major then b (n_out). Every model is a stack of
dense layers. Losses (means over the batch): linear squared error, logistic
binary cross-entropy, softmax/mlp cross-entropy.

MicroPython boxes every float it computes (a heap block per result, on the
ESP32 too), so float loops are allocation-bound and viper has no float type.
The matrix products therefore run in viper on integers, as block floating
point: ``_mm`` reads the float32 bits, aligns a row (and the whole other
operand) to its largest exponent as 23-bit mantissas, multiplies them as
three 12-bit partial products so every intermediate fits a 32-bit word
(ESP32), and writes float32 bits back, truncated. Each product carries a
relative error below 2**-22 of the largest product of its dot product; no
float is boxed inside. Only the per-element work with exp, log or tanh is
done in floats. A batch is processed layer by layer, so the scratch is one
output buffer per layer for ``batch`` rows (the relu backward pass reuses it
in place), allocated by ``Model(spec, batch)`` or on first use. On CPython
``ptr32`` is a uint32 memoryview and the same code runs as plain Python.
"""

import math
from array import array

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

    def ptr32(buf):
        """The buffer's bytes as unsigned 32-bit words, as viper's ptr32 sees them."""
        return memoryview(buf).cast("B").cast("I")


KINDS = ("linear", "logistic", "softmax", "mlp")
OUT_IDENTITY = 0
OUT_SIGMOID = 1
OUT_SOFTMAX = 2
ACT_RELU = 0
ACT_TANH = 1


def parse_spec(text):
    """Parse "linear:8", "logistic:32", "softmax:64x10", "mlp:64-32-10[:tanh]"."""
    if not isinstance(text, str) or ":" not in text:
        raise ValueError("model spec must look like kind:sizes, got " + repr(text))
    parts = text.split(":")
    kind = parts[0]
    if kind not in KINDS or len(parts) > 3 or (len(parts) == 3 and kind != "mlp"):
        raise ValueError("unknown model spec " + repr(text))
    act = parts[2] if len(parts) == 3 else "relu"
    if act not in ("relu", "tanh"):
        raise ValueError("activation must be relu or tanh, got " + repr(act))
    sep = "x" if kind == "softmax" else "-"
    try:
        sizes = [int(s) for s in parts[1].split(sep)]
    except ValueError:
        raise ValueError("bad sizes in model spec " + repr(text)) from None
    want = {"linear": 1, "logistic": 1, "softmax": 2}.get(kind, 0)
    if (want and len(sizes) != want) or (not want and len(sizes) not in (3, 4)):
        raise ValueError("wrong number of sizes in model spec " + repr(text))
    for s in sizes:
        if s < 1 or s > (1 << 20):
            raise ValueError("sizes must be in [1, 2**20] in " + repr(text))
    if kind == "softmax" and sizes[1] < 2 or kind == "mlp" and sizes[-1] < 2:
        raise ValueError("softmax/mlp need at least 2 classes in " + repr(text))
    if want == 1:
        sizes.append(1)
    return kind, sizes, act


@micropython.viper
def _emax(buf, off: int, n: int) -> int:
    """Largest biased float32 exponent among buf[off:off + n] (255: inf or nan)."""
    p = ptr32(buf)
    top = 0
    for i in range(off, off + n):
        e = (p[i] >> 23) & 255
        if e > top:
            top = e
    return top


@micropython.viper
def _mm(
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
    value <= 0 (relu's gradient, in place). Returns how many results
    overflowed float32 (stored as inf).
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
                if eo >= 255:
                    bits = inf
                    bad += 1
                elif eo > 0:
                    bits = (eo << 23) | (m & 0x7FFFFF)
                if neg:
                    bits = bits | sgn
            idx = oo + r * orow + c
            if mode == 1:
                if neg:
                    bits = 0
            elif mode == 2:
                old = po[idx]
                if old == 0 or (old & sgn) != 0:
                    bits = 0
            po[idx] = bits & m32
    return bad


def _softmax(z, o, n):
    """Probabilities in place of the logits z[o:o + n]; returns log-sum-exp."""
    m = z[o]
    for j in range(o + 1, o + n):
        if z[j] > m:
            m = z[j]
    s = 0.0
    for j in range(o, o + n):
        e = math.exp(z[j] - m)
        z[j] = e
        s += e
    inv = 1.0 / s
    for j in range(o, o + n):
        z[j] *= inv
    return math.log(s) + m


class Model:
    """A parsed model spec with its layer offsets and per-batch scratch."""

    def __init__(self, spec, batch=1):
        kind, sizes, act = parse_spec(spec)
        self.spec = spec
        self.kind = kind
        self.sizes = sizes
        self.n_features = sizes[0]
        self.n_outputs = sizes[-1]
        self.act = ACT_TANH if act == "tanh" else ACT_RELU
        if kind == "linear":
            self.out = OUT_IDENTITY
        elif kind == "logistic":
            self.out = OUT_SIGMOID
        else:
            self.out = OUT_SOFTMAX
        self.layers = []  # (w offset, b offset, n_in, n_out)
        off = 0
        for li in range(len(sizes) - 1):
            n_in, n_out = sizes[li], sizes[li + 1]
            self.layers.append((off, off + n_in * n_out, n_in, n_out))
            off += n_in * n_out + n_out
        self.n_params = off
        self.eb = [0] * len(self.layers)  # exponent of each layer's W and b
        self.cap = 0
        self.reserve(batch)

    def reserve(self, batch):
        """Scratch for ``batch`` rows: each layer's outputs, one prepared row."""
        if batch <= self.cap:
            return
        self.h = []  # let the old scratch go before the new one is taken
        self.h = [array("f", bytes(4 * batch * s)) for s in self.sizes[1:]]
        self.prep = array("i", bytes(4 * max(batch, max(self.sizes) + 1)))
        if self.act == ACT_TANH and len(self.layers) > 1:
            self.row = array("f", bytes(4 * max(self.sizes)))
        self.cap = batch

    def _forward(self, params, X, xo, n):
        """Outputs of n rows (from X[xo:]) of every layer into self.h; False if
        an input is inf or nan or a result overflowed."""
        last = len(self.layers) - 1
        src, so = X, xo
        ok = _emax(X, xo, n * self.n_features) < 255
        for li in range(last + 1):
            w, b, n_in, n_out = self.layers[li]
            h = self.h[li]
            eb = self.eb[li] = _emax(params, w, (n_in + 1) * n_out)
            mode = 1 if li < last and self.act == ACT_RELU else 0
            if _mm(src, so, n_in, 1, n_in, n_in + 1, params, w, 1, n_out, eb, h, 0,
                   n_out, mode, n, n_out, self.prep) or eb == 255:  # fmt: skip
                ok = False
            if li < last and self.act == ACT_TANH:
                for k in range(n * n_out):
                    h[k] = math.tanh(h[k])
            src, so = h, 0
        return ok

    def _loss_delta(self, y, n, scale):
        """Summed loss of n rows; leaves scale * dLoss/dz in the output buffer."""
        z, no = self.h[-1], self.n_outputs
        total = 0.0
        if self.out == OUT_SOFTMAX:
            for s in range(n):
                k = int(y[s])
                if k < 0 or k >= no:
                    raise ValueError("label out of range: " + str(y[s]))
                o = s * no
                zl = z[o + k]
                total += _softmax(z, o, no) - zl
                z[o + k] -= 1.0
                for j in range(o, o + no):
                    z[j] *= scale
            return total
        for s in range(n):
            v = z[s]
            if self.out == OUT_IDENTITY:
                err = v - y[s]
                z[s] = 2.0 * err * scale
                total += err * err
                continue
            t = float(y[s])
            # stable BCE: log(1 + e^-|v|) + max(v, 0) - t * v
            e = math.exp(-abs(v))
            total += math.log(1.0 + e) + (v if v > 0.0 else 0.0) - t * v
            prob = 1.0 / (1.0 + e) if v >= 0.0 else e / (1.0 + e)
            z[s] = (prob - t) * scale
        return total

    def loss_and_grad(self, params, X, y, n, grad):
        """Mean loss over the first n rows of X (row-major), gradient into grad."""
        if n <= 0:
            raise ValueError("batch must hold at least one sample")
        if len(params) != self.n_params or len(grad) != self.n_params:
            raise ValueError("params and grad must hold n_params floats")
        if len(X) < n * self.n_features or len(y) < n:
            raise ValueError("X or y holds fewer than n samples")
        self.reserve(n)
        scale = 1.0 / n
        ok = self._forward(params, X, 0, n)
        total = self._loss_delta(y, n, scale)
        prep, act = self.prep, self.act
        bad = 0
        for li in range(len(self.layers) - 1, -1, -1):
            w, b, n_in, n_out = self.layers[li]
            d = self.h[li]
            ed = _emax(d, 0, n * n_out)
            src = self.h[li - 1] if li > 0 else X
            # dW = src^T d, db = column sums of d (d already holds the 1/n)
            bad += _mm(src, 0, 1, n_in, n, n, d, 0, 1, n_out, ed, grad, w, n_out, 0,
                       n_in, n_out, prep)  # fmt: skip
            bad += _mm(src, 0, 0, 0, 0, n, d, 0, 1, n_out, ed, grad, b, 0, 0, 1,
                       n_out, prep)  # fmt: skip
            if li == 0:
                break
            # the previous layer's delta: (d W^T) * act'(h), into h in place
            eb = self.eb[li]
            if act == ACT_RELU:
                bad += _mm(d, 0, n_out, 1, n_out, n_out, params, w, n_out, 1, eb,
                           src, 0, n_in, 2, n, n_in, prep)  # fmt: skip
                continue
            row = self.row
            for s in range(n):
                bad += _mm(d, s * n_out, 0, 1, n_out, n_out, params, w, n_out, 1,
                           eb, row, 0, 0, 0, 1, n_in, prep)  # fmt: skip
                o = s * n_in
                for i in range(n_in):
                    v = src[o + i]
                    src[o + i] = row[i] * (1.0 - v * v)
        if ok and not bad and total == total:
            return total * scale
        nan = float("nan")
        for i in range(self.n_params):
            grad[i] = nan
        return nan

    def _outputs(self, s):
        """Turn row s of the output buffer into the model's outputs, in place."""
        z, no = self.h[-1], self.n_outputs
        if self.out == OUT_SOFTMAX:
            _softmax(z, s * no, no)
        elif self.out == OUT_SIGMOID:
            z[s] = 1.0 / (1.0 + math.exp(-z[s]))

    def forward(self, params, X, n, out):
        """Outputs of n rows into out (n * n_outputs): value, P(y=1) or class probs."""
        nf, no = self.n_features, self.n_outputs
        step = max(1, self.cap)
        for start in range(0, n, step):
            m = min(step, n - start)
            ok = self._forward(params, X, start * nf, m)
            z = self.h[-1]
            for s in range(m):
                self._outputs(s)
                o = (start + s) * no
                for j in range(no):
                    out[o + j] = z[s * no + j] if ok else float("nan")
        return out

    def predict_one(self, params, X, s):
        """Class id (or value, for linear) of row s."""
        self._forward(params, X, s * self.n_features, 1)
        z = self.h[-1]
        if self.out == OUT_IDENTITY:
            return z[0]
        if self.out == OUT_SIGMOID:
            return 1 if z[0] > 0.0 else 0
        best = 0
        for j in range(1, self.n_outputs):
            if z[j] > z[best]:
                best = j
        return best
