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

from array import array

from edgeps_worker import convk
from edgeps_worker.blockfp import emax, matmul
from edgeps_worker.kernels import _softmax

CONV = 0
MAXPOOL = 1
AVGPOOL = 2
DENSE = 3
COLS = 320  # floats of im2col scratch: a chunk of a conv's output positions
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
        self.h = [array("f", bytes(4 * ly[5] * ly[6])) for ly in layers]
        # scratch: im2col chunks, matmul's prepared row, the ReLU mask of an
        # input whose gradient is accumulated, argmax of overlapping max pools
        ncol, nprep, nmask, narg = 1, 2, 0, 0
        self.inv = [None] * len(layers)
        for i, ly in enumerate(layers):
            op, _, _, cin, lin, no, lo, k, s, _, _ = ly
            relu_in = i > 0 and layers[i - 1][10]
            if op == CONV:
                ck = cin * k
                ncol = max(ncol, self._chunk(ly) * ck)
                nprep = max(nprep, ck + 1, lo + 1, no + 1)
            elif op == DENSE:
                nprep = max(nprep, cin + 2, no + 1)
            else:
                nprep = max(nprep, k + 1, lo + 1)
                if op == AVGPOOL:
                    self.inv[i] = array("f", [1.0 / k])
                elif s < k:
                    narg = max(narg, cin * lo)
            if relu_in and (op == CONV or op == AVGPOOL or s < k):
                nmask = max(nmask, cin * lin)
        self.cols = array("f", bytes(4 * ncol))
        self.prep = array("i", bytes(4 * nprep))
        self.mask = bytearray(nmask)
        self.arg = array("i", bytes(4 * narg))

    @staticmethod
    def _chunk(ly):
        """Output positions per im2col chunk of conv layer ``ly``."""
        return max(1, min(ly[6], COLS // (ly[3] * ly[7])))

    def _forward(self, params, X, xo):
        """Every layer's output for the window at X[xo:]; False on inf, nan or
        an overflow."""
        src, so = X, xo
        ok = True
        cols, prep = self.cols, self.prep
        for i, ly in enumerate(self.layers):
            op, w, b, c, n, no, lo, k, s, p, act = ly
            h = self.h[i]
            ex = emax(src, so, c * n)
            if ex == 255:
                ok = False
            if op == CONV:
                ck = c * k
                convk.fill_bias(h, no, lo, params, b)
                t = self._chunk(ly)
                for t0 in range(0, lo, t):
                    m = min(t, lo - t0)
                    convk.im2col(src, so, n, n, c, k, s, p, t0, m, cols)
                    if matmul(params, w, ck, 1, ck, ck, cols, 0, ck, 1, ex, h, t0,
                              lo, 3, no, m, prep):  # fmt: skip
                        ok = False
                convk.relu(h, no * lo)
            elif op == DENSE:
                eb = self.eb[i] = emax(params, w, (c + 1) * no)
                if matmul(src, so, c, 1, c, c + 1, params, w, 1, no, eb, h, 0, no,
                          1 if act else 0, 1, no, prep) or eb == 255:  # fmt: skip
                    ok = False
            elif op == MAXPOOL:
                convk.maxpool(src, so, n, n, c, k, s, lo, h)
            else:
                inv = self.inv[i]
                for ch in range(c):
                    matmul(inv, 0, 0, 0, k, k, src, so + ch * n, s, 1, ex, h,
                           ch * lo, 0, 0, 1, lo, prep)  # fmt: skip
            src, so = h, 0
        return ok

    def _backward(self, params, X, xo, grad):
        """Add this window's gradient (its output delta in the last layer's
        buffer) to grad; the count of overflows."""
        cols, prep, mask = self.cols, self.prep, self.mask
        bad = 0
        for i in range(len(self.layers) - 1, -1, -1):
            op, w, b, c, n, no, lo, k, s, p, _ = self.layers[i]
            d = self.h[i]
            src, so = (self.h[i - 1], 0) if i else (X, xo)
            masked = i > 0 and self.layers[i - 1][10]
            ed = emax(d, 0, no * lo)
            if op == DENSE:
                bad += matmul(src, so, 1, c, 1, 1, d, 0, 1, no, ed, grad, w, no, 3,
                              c, no, prep)  # fmt: skip
                bad += matmul(src, 0, 0, 0, 0, 1, d, 0, 1, no, ed, grad, b, 0, 3, 1,
                              no, prep)  # fmt: skip
                if i:
                    md = 2 if masked else 0
                    bad += matmul(d, 0, no, 1, no, no, params, w, no, 1, self.eb[i],
                                  src, 0, c, md, 1, c, prep)  # fmt: skip
                continue
            if op == CONV:
                ck = c * k
                ex = emax(src, so, c * n)
                t = self._chunk(self.layers[i])
                for t0 in range(0, lo, t):
                    m = min(t, lo - t0)
                    convk.im2col(src, so, n, n, c, k, s, p, t0, m, cols)
                    bad += matmul(d, t0, lo, 1, m, m, cols, 0, 1, ck, ex, grad, w,
                                  ck, 3, no, ck, prep)  # fmt: skip
                bad += matmul(d, 0, 0, 0, 0, lo, d, 0, lo, 1, ed, grad, b, 0, 3, 1,
                              no, prep)  # fmt: skip
            if i == 0:
                break
            if op == MAXPOOL and s >= k:
                convk.maxpool_back(src, c, n, k, s, lo, d, 1 if masked else 0)
                continue
            if op == MAXPOOL:
                convk.argmax_pool(src, c, n, k, s, lo, self.arg)
            if masked:
                convk.keep_mask(src, c * n, mask)
            convk.zero(src, 0, c * n)
            if op == CONV:
                bad += self._conv_dx(params, self.layers[i], d, ed, src)
            elif op == MAXPOOL:
                arg = self.arg
                for j in range(c * lo):
                    src[arg[j]] += d[j]
            else:
                inv = self.inv[i]
                ei = emax(inv, 0, 1)
                for ch in range(c):
                    for j in range(k):
                        bad += matmul(d, ch * lo, 1, 0, 1, 1, inv, 0, 0, 0, ei, src,
                                      ch * n + j, s, 3, lo, 1, prep)  # fmt: skip
            if masked:
                convk.apply_mask(src, c * n, mask)
        return bad

    def _conv_dx(self, params, ly, d, ed, dx):
        """A conv's input gradient, added into dx one kernel tap at a time."""
        _, w, _, c, n, no, lo, k, s, p, _ = ly
        ck, prep, bad = c * k, self.prep, 0
        for j in range(k):
            if s == 1:
                t0 = max(0, p - j)
                t1 = min(lo, n + p - j)
                if t1 > t0:
                    bad += matmul(params, w + j, k, ck, no, no, d, t0, 1, lo, ed, dx,
                                  t0 + j - p, n, 3, c, t1 - t0, prep)  # fmt: skip
                continue
            for t in range(lo):
                u = t * s + j - p
                if 0 <= u < n:
                    bad += matmul(params, w + j, k, ck, no, no, d, t, 1, lo, ed, dx,
                                  u, n, 3, c, 1, prep)  # fmt: skip
        return bad

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

    def loss_and_grad(self, params, X, y, n, grad, fill=None):
        """Mean loss over n windows (rows of X), gradient into grad; with
        ``fill(X, y, 1)`` X and y hold one window, refilled before each."""
        self._check(params, X, 0, 1 if fill else n)
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

    def forward(self, params, X, n, out):
        """Class probabilities of n windows into out (n * n_outputs)."""
        self._check(params, X, 0, n)
        no = self.n_outputs
        for r in range(n):
            ok = self._forward(params, X, r * self.n_features)
            z = self.h[-1]
            _softmax(z, 0, no, 1.0)
            for j in range(no):
                out[r * no + j] = z[j] if ok else float("nan")
        return out

    def predict_one(self, params, X, s):
        """Class id of window s of X."""
        self._check(params, X, s, 1)
        self._forward(params, X, s * self.n_features)
        z, best = self.h[-1], 0
        for j in range(1, self.n_outputs):
            if z[j] > z[best]:
                best = j
        return best

    def _check(self, params, X, first, n):
        """The viper code reads without bounds checks: the buffers must fit."""
        if n <= 0 or first < 0:
            raise ValueError("batch must hold at least one sample")
        if len(params) != self.n_params:
            raise ValueError("params must hold n_params floats")
        if len(X) < (first + n) * self.n_features:
            raise ValueError("X holds fewer than the rows asked for")
