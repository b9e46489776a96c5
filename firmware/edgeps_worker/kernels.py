"""Gradient kernels on array('f') buffers for boards: linear, logistic, softmax, MLP.

The flat parameter layout is the one of ``edgeps.kernels``: layers in order,
each W (n_in, n_out) row-major then b (n_out). Every model is a stack of
dense layers. Losses (means over the batch): linear squared error, logistic
binary cross-entropy, softmax/mlp cross-entropy.

The dense layers run through ``blockfp.matmul`` (integer viper, no boxed
floats); only the per-element work with exp, log or tanh is done in floats.
A batch is processed ROWS rows at a time, layer by layer: the scratch is one
output buffer per layer for ROWS rows (the relu backward pass reuses it in
place for the deltas), allocated once in ``Model``, and each chunk's
gradient is added to the previous ones in float32.
"""

import math
from array import array

from edgeps_worker.blockfp import emax, matmul

KINDS = ("linear", "logistic", "softmax", "mlp")
OUT_IDENTITY = 0
OUT_SIGMOID = 1
OUT_SOFTMAX = 2
ACT_RELU = 0
ACT_TANH = 1
ROWS = 4  # rows per chunk of a batch: scratch is ROWS * (sum of layer widths) floats


def parse_spec(text):
    """Parse "linear:8", "logistic:32", "softmax:64x10", "mlp:64-32-10[:tanh]";
    a "conv1d:..." spec is parsed by ``edgeps_worker.conv`` (loaded only then)."""
    if isinstance(text, str) and text.startswith("conv"):
        from edgeps_worker import conv

        return conv.parse_spec(text)
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


def net(spec, batch=ROWS):
    """The kernels of ``spec``: a conv network (``edgeps_worker.conv``) or a Model."""
    if spec.startswith("conv"):
        from edgeps_worker.conv import ConvNet

        return ConvNet(spec, batch)
    return Model(spec, batch)


def n_params(spec):
    """Parameters of ``spec``, without a conv network's scratch."""
    if spec.startswith("conv"):
        from edgeps_worker import conv

        return conv.n_params(spec)
    return Model(spec).n_params


def _softmax(z, o, n, scale):
    """scale * probabilities in place of the logits z[o:o + n]; log-sum-exp."""
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


class Model:
    """A parsed model spec with its layer offsets and preallocated scratch."""

    def __init__(self, spec, batch=ROWS):
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
        # scratch: each layer's outputs (then deltas) for a chunk, a prepared row
        self.rows = rows = max(1, min(batch, ROWS))
        self.h = [array("f", bytes(4 * rows * s)) for s in sizes[1:]]
        self.prep = array("i", bytes(4 * max(rows, max(sizes) + 1)))
        if self.act == ACT_TANH and len(self.layers) > 1:
            self.row = array("f", bytes(4 * max(sizes)))

    def _forward(self, params, X, xo, n):
        """Outputs of n <= rows rows (from X[xo:]) of every layer into self.h;
        False if an input is inf or nan or a result overflowed."""
        last = len(self.layers) - 1
        src, so = X, xo
        ok = emax(X, xo, n * self.n_features) < 255
        for li in range(last + 1):
            w, b, n_in, n_out = self.layers[li]
            h = self.h[li]
            eb = self.eb[li] = emax(params, w, (n_in + 1) * n_out)
            mode = 1 if li < last and self.act == ACT_RELU else 0
            if matmul(src, so, n_in, 1, n_in, n_in + 1, params, w, 1, n_out, eb, h, 0,
                      n_out, mode, n, n_out, self.prep) or eb == 255:  # fmt: skip
                ok = False
            if li < last and self.act == ACT_TANH:
                for k in range(n * n_out):
                    h[k] = math.tanh(h[k])
            src, so = h, 0
        return ok

    def _loss_delta(self, y, yo, n, scale):
        """Summed loss of n rows (labels y[yo:]); leaves scale * dLoss/dz in the
        output buffer."""
        z, no = self.h[-1], self.n_outputs
        total = 0.0
        if self.out == OUT_SOFTMAX:
            for s in range(n):
                k = int(y[yo + s])
                if k < 0 or k >= no:
                    raise ValueError("label out of range: " + str(y[yo + s]))
                o = s * no
                zl = z[o + k]
                total += _softmax(z, o, no, scale) - zl
                z[o + k] -= scale
            return total
        for s in range(n):
            v = z[s]
            if self.out == OUT_IDENTITY:
                err = v - y[yo + s]
                z[s] = 2.0 * err * scale
                total += err * err
                continue
            t = float(y[yo + s])
            # stable BCE: log(1 + e^-|v|) + max(v, 0) - t * v
            e = math.exp(-abs(v))
            total += math.log(1.0 + e) + (v if v > 0.0 else 0.0) - t * v
            prob = 1.0 / (1.0 + e) if v >= 0.0 else e / (1.0 + e)
            z[s] = (prob - t) * scale
        return total

    def _backward(self, params, X, xo, n, grad, mode):
        """Gradient of the chunk left by _forward and _loss_delta, stored into
        (mode 0) or added to (mode 3) grad; the count of overflows."""
        prep, act = self.prep, self.act
        bad = 0
        for li in range(len(self.layers) - 1, -1, -1):
            w, b, n_in, n_out = self.layers[li]
            d = self.h[li]
            ed = emax(d, 0, n * n_out)
            src, so = (self.h[li - 1], 0) if li > 0 else (X, xo)
            # dW = src^T d, db = column sums of d (d already holds the 1/n)
            bad += matmul(src, so, 1, n_in, n, n, d, 0, 1, n_out, ed, grad, w, n_out,
                          mode, n_in, n_out, prep)  # fmt: skip
            bad += matmul(src, 0, 0, 0, 0, n, d, 0, 1, n_out, ed, grad, b, 0, mode, 1,
                          n_out, prep)  # fmt: skip
            if li == 0:
                break
            # the previous layer's delta: (d W^T) * act'(h), into h in place
            eb = self.eb[li]
            if act == ACT_RELU:
                bad += matmul(d, 0, n_out, 1, n_out, n_out, params, w, n_out, 1, eb,
                              src, 0, n_in, 2, n, n_in, prep)  # fmt: skip
                continue
            row = self.row
            for s in range(n):
                bad += matmul(d, s * n_out, 0, 1, n_out, n_out, params, w, n_out, 1,
                              eb, row, 0, 0, 0, 1, n_in, prep)  # fmt: skip
                o = s * n_in
                for i in range(n_in):
                    v = src[o + i]
                    src[o + i] = row[i] * (1.0 - v * v)
        return bad

    def loss_and_grad(self, params, X, y, n, grad, fill=None):
        """Mean loss over the first n rows of X (row-major), gradient into grad.

        With ``fill(X, y, m)``, X and y hold one chunk (``rows`` rows): fill
        writes the batch's next m rows there before each chunk, so a board
        never holds the whole batch.
        """
        k = n if fill is None else min(n, self.rows)
        self._check(params, X, 0, k)
        if len(grad) != self.n_params or len(y) < k:
            raise ValueError("grad must hold n_params floats, y n labels")
        scale = 1.0 / n
        total = 0.0
        ok = True
        nf = self.n_features
        for start in range(0, n, self.rows):
            m = min(self.rows, n - start)
            yo = start
            if fill is not None:
                fill(X, y, m)
                yo = 0
            if not self._forward(params, X, yo * nf, m):
                ok = False
            total += self._loss_delta(y, yo, m, scale)
            if self._backward(params, X, yo * nf, m, grad, 3 if start else 0):
                ok = False
        if ok and total == total:
            return total * scale
        nan = float("nan")
        for i in range(self.n_params):
            grad[i] = nan
        return nan

    def _check(self, params, X, first, n):
        """The viper code reads without bounds checks: the buffers must fit."""
        if n <= 0 or first < 0:
            raise ValueError("batch must hold at least one sample")
        if len(params) != self.n_params:
            raise ValueError("params must hold n_params floats")
        if len(X) < (first + n) * self.n_features:
            raise ValueError("X holds fewer than the rows asked for")
