"""The board's 1-D conv network: spec text, forward, softmax cross-entropy, gradient.

Loaded only for a ``conv1d:`` model (``kernels.parse_spec``, ``kernels.net``),
so a dense board's heap holds none of it. The spec and the flat parameter
layout are the host's (host/edgeps/kernels/layers.py): ``conv1d:<C>x<L>-``
then layers ``c<N>k<K>[s<S>][p<P>]`` (conv + ReLU), ``m<K>[s<S>]`` /
``a<K>[s<S>]`` (max / average pooling), ``d<N>`` (dense + ReLU) and the
class count (the dense output); a conv's W (N, C, K) then b (N), a dense
layer's W (n_in, n_out) then b; activations channel first.

A batch is taken one window at a time. Each layer keeps its output (one
window's), allocated here once from the spec; the backward pass writes
each layer's input gradient over that input in place, so no delta buffers
exist. Products run in ``blockfp.matmul`` (integer block floating point):
a conv through im2col windows of at most ``COLS`` floats, its input
gradient tap by tap; bit moves, ReLU and max pooling in ``convk``.
"""

import math
from array import array

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

from edgeps_worker import convk
from edgeps_worker.blockfp import emax, matmul


@micropython.native
def _softmax(z, o, n, scale):
    """kernels._softmax (a conv board does not keep the kernels module)."""
    m = z[o]
    for j in range(o + 1, o + n):
        if z[j] > m:
            m = z[j]
    s = 0.0
    for j in range(o, o + n):
        e = math.exp(z[j] - m)
        z[j] = e
        s += e
    c = scale / s
    for j in range(o, o + n):
        z[j] *= c
    return math.log(s) + m


CONV = 0
MAXPOOL = 1
AVGPOOL = 2
DENSE = 3
COLS = 128  # floats of im2col scratch: a chunk of a conv's output positions
MAX_DIM = 1 << 20


def _num(tok, i):
    """(the decimal number at tok[i:], the index after it); ValueError if none."""
    j = i
    while j < len(tok) and "0" <= tok[j] <= "9":
        j += 1
    if j == i:
        raise ValueError("bad layer " + repr(tok))
    return int(tok[i:j]), j


def _layer(tok, last):
    """(op, n_out, k, stride, pad, relu) of one layer token."""
    if tok[0] in "cmad":
        op = "cmad".index(tok[0])
        n, i = _num(tok, 1)
        k, s, p = 1, 1, 0
        if op == CONV:
            if i >= len(tok) or tok[i] != "k":
                raise ValueError("bad layer " + repr(tok))
            k, i = _num(tok, i + 1)
        elif op != DENSE:
            k, s = n, n
            n = 0
        for key in "sp":
            if i < len(tok) and tok[i] == key and (key == "s" or op == CONV):
                v, i = _num(tok, i + 1)
                if key == "s":
                    s = v
                else:
                    p = v
        if i != len(tok) or last:
            raise ValueError("bad layer " + repr(tok))
        return op, n, k, s, p, True
    n, i = _num(tok, 0)
    if i != len(tok) or not last:
        raise ValueError("a bare number must be the last layer, got " + repr(tok))
    return DENSE, n, 1, 1, 0, False


def plan(text):
    """(C, L, layers): each layer (op, w, b, C, L, N, Lo, k, s, p, relu) with
    its parameter offsets, input channels and length, outputs; ValueError."""
    if not isinstance(text, str) or not text.startswith("conv1d:"):
        raise ValueError("not a conv1d spec: " + repr(text))
    toks = text[7:].split("-")
    shape = toks[0].split("x")
    if len(toks) < 2 or len(shape) != 2:
        raise ValueError("conv1d takes <C>x<L>-<layers>-<classes>, got " + repr(text))
    try:
        c, n = int(shape[0]), int(shape[1])
    except ValueError:
        raise ValueError("bad input shape in " + repr(text)) from None
    if not (1 <= c <= MAX_DIM and 1 <= n <= MAX_DIM) or len(toks) > 33:
        raise ValueError("input dimensions or layer count out of range: " + text)
    layers, off, flat = [], 0, False
    for i in range(1, len(toks)):
        op, no, k, s, p, act = _layer(toks[i], i == len(toks) - 1)
        if not (1 <= k <= MAX_DIM and 1 <= s <= MAX_DIM and 0 <= p < k):
            raise ValueError("width, stride or padding out of range: " + toks[i])
        if op == DENSE:
            if not 1 <= no <= MAX_DIM:
                raise ValueError("width out of range: " + toks[i])
            nin = c * n
            layers.append((op, off, off + nin * no, nin, 1, no, 1, 1, 1, 0, act))
            off += nin * no + no
            c, n, flat = no, 1, True
            continue
        if flat:
            raise ValueError(toks[i] + " comes after a dense layer")
        span = n + 2 * p - k
        if span < 0:
            raise ValueError(toks[i] + " is wider than its input")
        lo = span // s + 1
        if op == CONV:
            if not 1 <= no <= MAX_DIM:
                raise ValueError("width out of range: " + toks[i])
            nw = no * c * k
            layers.append((op, off, off + nw, c, n, no, lo, k, s, p, True))
            off += nw + no
            c = no
        else:
            layers.append((op, off, off, c, n, c, lo, k, s, 0, False))
        n = lo
    if layers[-1][5] < 2:
        raise ValueError("a conv model needs at least 2 classes: " + text)
    return int(shape[0]), int(shape[1]), layers


def parse_spec(text):
    """``kernels.parse_spec``'s answer for a conv1d spec: (kind, [n_features,
    n_classes], "relu")."""
    c, n, layers = plan(text)
    return "conv1d", [c * n, layers[-1][5]], "relu"


def n_params(text):
    """Parameters of a conv1d spec, with no scratch taken."""
    ly = plan(text)[2][-1]
    return ly[2] + ly[5]


class ConvNet:
    """A conv1d spec with its layer plan and scratch; ``kernels.Model``'s face."""

    out = 2  # kernels.OUT_SOFTMAX

    def __init__(self, spec, batch=1):
        c, n, layers = plan(spec)
        self.spec = spec
        self.kind = "conv1d"
        self.layers = layers
        self.n_features = c * n
        self.n_outputs = layers[-1][5]
        self.n_params = n_params(spec)
        self.rows = 1  # a batch is read one window at a time
        self.eb = [0] * len(layers)
        # a conv followed by a max pool whose windows do not overlap keeps no
        # output: it is made (and, backward, its delta) a chunk at a time in z
        self.fused = [
            ly[0] == CONV and i + 1 < len(layers) and layers[i + 1][0] == MAXPOOL
            and layers[i + 1][8] >= layers[i + 1][7]
            for i, ly in enumerate(layers)
        ]  # fmt: skip
        # sizes until _alloc; then each layer's output (empty: fused), each
        # max pool's argmax bytes, each average pool's 1/k
        self.hn, self.argn, self.inv = [], [], []
        self.none = array("f")  # one empty array for every layer without
        # scratch: im2col chunks, a fused chunk, matmul's prepared row, the
        # ReLU mask of an input whose gradient is accumulated
        ncol, nz, nprep, nmask = 1, 1, 2, 0
        for i, ly in enumerate(layers):
            op, _, _, cin, lin, no, lo, k, s, _, _ = ly
            self.hn.append(0 if self.fused[i] else no * lo)
            self.argn.append(no * lo if op == MAXPOOL else 0)
            self.inv.append(array("f", [1.0 / k]) if op == AVGPOOL else self.none)
            if op == MAXPOOL and k > 254:
                raise ValueError("a board pools at most 254 samples a window")
            relu_in = i > 0 and layers[i - 1][10]
            if op == CONV:
                t = self._chunk(i)
                ncol = max(ncol, t * cin * k)
                nz = max(nz, t * no) if self.fused[i] else nz
                nprep = max(nprep, cin * k + 1, lo + 1, no + 1)
            elif op == DENSE:
                nprep = max(nprep, cin + 2, no + 1)
            else:
                nprep = max(nprep, k + 1, lo + 1)
            if relu_in and (op == CONV or op == AVGPOOL):
                nmask = max(nmask, cin * lin)
        self.sizes = (ncol, nz, nprep, nmask)
        self.ready = False  # the scratch is taken at the first step (_alloc)

    def _alloc(self):
        """Take the scratch the sizes of ``__init__`` say: at the first step,
        once a board's start-up code (MQTT's connect, the builder) is gone."""
        none, no_arg = self.none, bytearray(0)
        self.h = [array("f", range(n)) if n else none for n in self.hn]
        self.arg = [bytearray(n) if n else no_arg for n in self.argn]
        self.hn = self.argn = []
        ncol, nz, nprep, nmask = self.sizes
        self.z = array("f", range(nz))
        self.prep = array("i", range(nprep))
        self.mask = bytearray(nmask)
        self.cols = array("f", range(ncol))
        self.ready = True

    def _chunk(self, i):
        """Output positions per chunk of conv layer i: a whole number of pool
        windows when it is fused; im2col and z hold at most COLS floats."""
        ly = self.layers[i]
        if not self.fused[i]:
            return max(1, min(ly[6], COLS // (ly[3] * ly[7])))
        s = self.layers[i + 1][8]
        return s * max(1, COLS // (s * max(ly[3] * ly[7], ly[5])))

    @micropython.native
    def _forward(self, params, X, xo):
        """Every layer's output for the window at X[xo:]; False on inf, nan or
        an overflow."""
        src, so = X, xo
        ok = True
        cols, prep, z = self.cols, self.prep, self.z
        for i, ly in enumerate(self.layers):
            op, w, b, c, n, no, lo, k, s, p, act = ly
            h = self.h[i]
            ex = 0
            if op != MAXPOOL or not i:  # a pool's input was checked as an output
                ex = emax(src, so, c * n)
            if ex == 255:
                ok = False
            if op == CONV:
                ck = c * k
                t = self._chunk(i)
                fused = self.fused[i]
                if not fused:
                    convk.fill_bias(h, no, lo, params, b)
                for t0 in range(0, lo, t):
                    m = min(t, lo - t0)
                    out, oo, orow = h, t0, lo
                    if fused:
                        out, oo, orow = z, 0, t
                        convk.fill_bias(z, no, t, params, b)
                    convk.im2col(src, so, n, n, c, k, s, p, t0, m, cols)
                    if matmul(params, w, ck, 1, ck, ck, cols, 0, ck, 1, ex, out, oo,
                              orow, 3, no, m, prep):  # fmt: skip
                        ok = False
                    if fused:
                        convk.relu(z, no * t)
                        pl = self.layers[i + 1]
                        o0 = t0 // pl[8]
                        convk.pool_arg(z, 0, t, no, pl[7], pl[8], min(t // pl[8],
                                       pl[6] - o0), self.h[i + 1], o0, pl[6],
                                       self.arg[i + 1], 1)  # fmt: skip
                if not fused:
                    convk.relu(h, no * lo)
            elif op == DENSE:
                eb = self.eb[i] = emax(params, w, (c + 1) * no)
                if matmul(src, so, c, 1, c, c + 1, params, w, 1, no, eb, h, 0, no,
                          1 if act else 0, 1, no, prep) or eb == 255:  # fmt: skip
                    ok = False
            elif op == MAXPOOL:
                if not (i and self.fused[i - 1]):  # else made with its conv
                    masked = 1 if i and self.layers[i - 1][10] else 0
                    convk.pool_arg(src, so, n, c, k, s, lo, h, 0, lo, self.arg[i],
                                   masked)  # fmt: skip
            else:
                inv = self.inv[i]
                for ch in range(c):
                    matmul(inv, 0, 0, 0, k, k, src, so + ch * n, s, 1, ex, h,
                           ch * lo, 0, 0, 1, lo, prep)  # fmt: skip
            if len(h):  # a fused conv's outputs went straight to its pool
                src, so = h, 0
        return ok

    @micropython.native
    def _unpooled(self, i, t0, t):
        """Fused conv layer i's output delta at positions t0..t0+t-1 into z,
        from its max pool's delta and argmax; the chunk's window count."""
        no = self.layers[i][5]
        pl = self.layers[i + 1]
        o0 = t0 // pl[8]
        nw = min(t // pl[8], pl[6] - o0)
        convk.zero(self.z, 0, no * t)
        convk.unpool(self.h[i + 1], o0, pl[6], no, pl[8], nw, self.arg[i + 1],
                     self.z, 0, t)  # fmt: skip
        return nw

    @micropython.native
    def _backward(self, params, X, xo, grad):
        """Add this window's gradient (its output delta in the last layer's
        buffer) to grad; the count of overflows."""
        cols, prep, mask, z = self.cols, self.prep, self.mask, self.z
        bad = 0
        i = len(self.layers) - 1
        while i >= 0:
            op, w, b, c, n, no, lo, k, s, p, _ = self.layers[i]
            fused = op == MAXPOOL and i and self.fused[i - 1]
            if fused:  # the pool's delta is the fused conv's, a chunk at a time
                i -= 1
                op, w, b, c, n, no, lo, k, s, p, _ = self.layers[i]
            d = self.h[i + 1] if fused else self.h[i]
            src, so = (self.h[i - 1], 0) if i else (X, xo)
            masked = i > 0 and self.layers[i - 1][10]
            ed = emax(d, 0, len(d))
            if op == DENSE:
                bad += matmul(src, so, 1, c, 1, 1, d, 0, 1, no, ed, grad, w, no, 3,
                              c, no, prep)  # fmt: skip
                bad += matmul(src, 0, 0, 0, 0, 1, d, 0, 1, no, ed, grad, b, 0, 3, 1,
                              no, prep)  # fmt: skip
                if i:
                    md = 2 if masked else 0
                    bad += matmul(d, 0, no, 1, no, no, params, w, no, 1, self.eb[i],
                                  src, 0, c, md, 1, c, prep)  # fmt: skip
                i -= 1
                continue
            if op == CONV:
                ck = c * k
                ex = emax(src, so, c * n)
                t = self._chunk(i)
                for t0 in range(0, lo, t):
                    m = min(t, lo - t0)
                    dd, do, drow = d, t0, lo
                    if fused:
                        self._unpooled(i, t0, t)
                        dd, do, drow = z, 0, t
                    convk.im2col(src, so, n, n, c, k, s, p, t0, m, cols)
                    bad += matmul(dd, do, drow, 1, m, m, cols, 0, 1, ck, ex, grad, w,
                                  ck, 3, no, ck, prep)  # fmt: skip
                    bad += matmul(dd, do, 0, 0, 0, m, dd, do, drow, 1, ed, grad, b, 0,
                                  3, 1, no, prep)  # fmt: skip
            if i == 0:
                break
            if masked and op != MAXPOOL:
                convk.keep_mask(src, c * n, mask)
            convk.zero(src, 0, c * n)
            if op == CONV:
                t = self._chunk(i)
                for t0 in range(0, lo, t):
                    m = min(t, lo - t0)
                    if fused:
                        self._unpooled(i, t0, t)
                        bad += self._conv_dx(params, i, z, 0, t, t0, m, ed, src)
                    else:
                        bad += self._conv_dx(params, i, d, t0, lo, t0, m, ed, src)
            elif op == MAXPOOL and s >= k:
                convk.unpool(d, 0, lo, c, s, lo, self.arg[i], src, 0, n)
            elif op == MAXPOOL:
                arg = self.arg[i]
                for ch in range(c):
                    for o in range(lo):
                        a = arg[ch * lo + o]
                        if a != 255:
                            src[ch * n + o * s + a] += d[ch * lo + o]
            else:
                inv = self.inv[i]
                ei = emax(inv, 0, 1)
                for ch in range(c):
                    for j in range(k):
                        bad += matmul(d, ch * lo, 1, 0, 1, 1, inv, 0, 0, 0, ei, src,
                                      ch * n + j, s, 3, lo, 1, prep)  # fmt: skip
            if masked and op != MAXPOOL:
                convk.apply_mask(src, c * n, mask)
            i -= 1
        return bad

    @micropython.native
    def _conv_dx(self, params, i, d, do, drow, t0, m, ed, dx):
        """Add to dx conv layer i's input gradient from its output delta at
        positions t0..t0+m-1 (d[do + n*drow + t - t0]), tap by tap."""
        _, w, _, c, n, no, _, k, s, p, _ = self.layers[i]
        ck, prep, bad = c * k, self.prep, 0
        for j in range(k):
            if s == 1:
                lo = max(t0, p - j)
                hi = min(t0 + m, n + p - j)
                if hi > lo:
                    bad += matmul(params, w + j, k, ck, no, no, d, do + lo - t0, 1,
                                  drow, ed, dx, lo + j - p, n, 3, c, hi - lo,
                                  prep)  # fmt: skip
                continue
            for t in range(t0, t0 + m):
                u = t * s + j - p
                if 0 <= u < n:
                    bad += matmul(params, w + j, k, ck, no, no, d, do + t - t0, 1,
                                  drow, ed, dx, u, n, 3, c, 1, prep)  # fmt: skip
        return bad

    @micropython.native
    def _delta(self, y, yo, scale):
        """Cross-entropy of the window's logits against label y[yo]; leaves
        scale * dLoss/dlogits in their place."""
        z, no = self.h[-1], self.n_outputs
        k = int(y[yo])
        if k < 0 or k >= no:
            raise ValueError("label out of range: " + str(y[yo]))
        zk = z[k]
        loss = _softmax(z, 0, no, scale) - zk
        z[k] -= scale
        return loss

    @micropython.native
    def loss_and_grad(self, params, X, y, n, grad, fill=None):
        """Mean loss over n windows (rows of X), gradient into grad; with
        ``fill(X, y, 1)`` X and y hold one window, refilled before each."""
        self._check(params, X, 0, 1 if fill else n)
        if not self.ready:
            self._alloc()
        if len(grad) != self.n_params or len(y) < (1 if fill else n):
            raise ValueError("grad must hold n_params floats, y n labels")
        convk.zero(grad, 0, self.n_params)
        scale = 1.0 / n
        total = 0.0
        ok = True
        nf = self.n_features
        for r in range(n):
            yo = r
            if fill is not None:
                fill(X, y, 1)
                yo = 0
            if not self._forward(params, X, yo * nf):
                ok = False
            total += self._delta(y, yo, scale)
            if self._backward(params, X, yo * nf, grad):
                ok = False
        if ok and total == total:
            return total * scale
        nan = float("nan")
        for i in range(self.n_params):
            grad[i] = nan
        return nan

    @micropython.native
    def forward(self, params, X, n, out):
        """Class probabilities of n windows into out (n * n_outputs)."""
        self._check(params, X, 0, n)
        if not self.ready:
            self._alloc()
        no = self.n_outputs
        for r in range(n):
            ok = self._forward(params, X, r * self.n_features)
            z = self.h[-1]
            _softmax(z, 0, no, 1.0)
            for j in range(no):
                out[r * no + j] = z[j] if ok else float("nan")
        return out

    @micropython.native
    def predict_one(self, params, X, s):
        """Class id of window s of X."""
        self._check(params, X, s, 1)
        if not self.ready:
            self._alloc()
        self._forward(params, X, s * self.n_features)
        z, best = self.h[-1], 0
        for j in range(1, self.n_outputs):
            if z[j] > z[best]:
                best = j
        return best

    @micropython.native
    def _check(self, params, X, first, n):
        """The viper code reads without bounds checks: the buffers must fit."""
        if n <= 0 or first < 0:
            raise ValueError("batch must hold at least one sample")
        if len(params) != self.n_params:
            raise ValueError("params must hold n_params floats")
        if len(X) < (first + n) * self.n_features:
            raise ValueError("X holds fewer than the rows asked for")
