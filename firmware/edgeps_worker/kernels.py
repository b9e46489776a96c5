"""Gradient kernels on array('f') buffers for boards: linear, logistic, softmax, MLP.

The flat parameter layout is the one of ``edgeps.kernels``: layers in order,
each W (n_in, n_out) row-major then b (n_out). Every model is a stack of
dense layers, evaluated one sample at a time so scratch memory is a few
layer-widths, allocated once in ``Model``. Losses (means over the batch):
linear squared error, logistic binary cross-entropy, softmax/mlp
cross-entropy. The hot functions carry ``@micropython.native`` (valid on
xtensawin and x64); on CPython a shim makes the decorator a no-op.
"""

import math
from array import array

try:
    import micropython  # type: ignore[import-not-found]
except ImportError:
    from edgeps_worker import _mpshim as micropython  # type: ignore[no-redef]

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


@micropython.native
def _dense(p, w, b, x, xo, n_in, n_out, out):
    """out[j] = b[j] + sum_i x[xo + i] * W[i, j]."""
    for j in range(n_out):
        acc = p[b + j]
        k = w + j
        for i in range(n_in):
            acc += x[xo + i] * p[k]
            k += n_out
        out[j] = acc


@micropython.native
def _activate(h, n, act):
    if act == 0:
        for j in range(n):
            if h[j] < 0.0:
                h[j] = 0.0
    else:
        for j in range(n):
            h[j] = math.tanh(h[j])


@micropython.native
def _softmax_ce(z, n, label):
    """Turn logits z into probabilities in place; return -log p[label]."""
    zl = z[label]
    m = z[0]
    for j in range(1, n):
        if z[j] > m:
            m = z[j]
    s = 0.0
    for j in range(n):
        z[j] = math.exp(z[j] - m)
        s += z[j]
    inv = 1.0 / s
    for j in range(n):
        z[j] *= inv
    return math.log(s) + m - zl


@micropython.native
def _backward(p, g, w, b, x, xo, n_in, n_out, d, dprev, scale, want_prev):
    """Accumulate scale * (dW, db) for delta d; W @ d into dprev if want_prev."""
    for j in range(n_out):
        g[b + j] += d[j] * scale
    k = w
    for i in range(n_in):
        xi = x[xo + i] * scale
        if want_prev:
            acc = 0.0
            for j in range(n_out):
                g[k] += xi * d[j]
                acc += p[k] * d[j]
                k += 1
            dprev[i] = acc
        else:
            for j in range(n_out):
                g[k] += xi * d[j]
                k += 1


@micropython.native
def _act_grad(dprev, h, n, act):
    if act == 0:
        for i in range(n):
            if h[i] <= 0.0:
                dprev[i] = 0.0
    else:
        for i in range(n):
            dprev[i] *= 1.0 - h[i] * h[i]


@micropython.native
def _zero(buf, n):
    for i in range(n):
        buf[i] = 0.0


class Model:
    """A parsed model spec with its layer offsets and preallocated scratch."""

    def __init__(self, spec):
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
        # one output buffer per layer (forward) and two deltas (backward)
        self.h = [array("f", bytes(4 * s)) for s in sizes[1:]]
        widest = max(sizes)
        self.d = array("f", bytes(4 * widest))
        self.dprev = array("f", bytes(4 * widest))

    def _forward_one(self, params, x, xo):
        """Run one sample (row at x[xo:]) through the net, into self.h."""
        src, so = x, xo
        last = len(self.layers) - 1
        for li in range(last + 1):
            w, b, n_in, n_out = self.layers[li]
            h = self.h[li]
            _dense(params, w, b, src, so, n_in, n_out, h)
            if li < last:
                _activate(h, n_out, self.act)
            src, so = h, 0
        return self.h[last]

    def _loss_delta(self, z, label):
        """Loss of one sample from output z; leaves dLoss/dz in self.d."""
        d = self.d
        if self.out == OUT_SOFTMAX:
            k = int(label)
            if k < 0 or k >= self.n_outputs:
                raise ValueError("label out of range: " + str(label))
            loss = _softmax_ce(z, self.n_outputs, k)
            for j in range(self.n_outputs):
                d[j] = z[j]
            d[k] -= 1.0
            return loss
        v = z[0]
        if self.out == OUT_IDENTITY:
            err = v - label
            d[0] = 2.0 * err
            return err * err
        t = float(label)
        # stable BCE: log(1 + e^-|v|) + max(v, 0) - t * v
        e = math.exp(-abs(v))
        loss = math.log(1.0 + e) + (v if v > 0.0 else 0.0) - t * v
        prob = 1.0 / (1.0 + e) if v >= 0.0 else e / (1.0 + e)
        d[0] = prob - t
        return loss

    def loss_and_grad(self, params, X, y, n, grad):
        """Mean loss over the first n rows of X (row-major), gradient into grad."""
        if n <= 0:
            raise ValueError("batch must hold at least one sample")
        if len(params) != self.n_params or len(grad) != self.n_params:
            raise ValueError("params and grad must hold n_params floats")
        if len(X) < n * self.n_features or len(y) < n:
            raise ValueError("X or y holds fewer than n samples")
        _zero(grad, self.n_params)
        scale = 1.0 / n
        total = 0.0
        nf = self.n_features
        last = len(self.layers) - 1
        for s in range(n):
            z = self._forward_one(params, X, s * nf)
            total += self._loss_delta(z, y[s])
            d, dprev = self.d, self.dprev
            for li in range(last, -1, -1):
                w, b, n_in, n_out = self.layers[li]
                if li > 0:
                    src, so = self.h[li - 1], 0
                else:
                    src, so = X, s * nf
                _backward(
                    params, grad, w, b, src, so, n_in, n_out, d, dprev, scale, li > 0
                )
                if li > 0:
                    _act_grad(dprev, self.h[li - 1], n_in, self.act)
                    d, dprev = dprev, d
        return total * scale

    def forward(self, params, X, n, out):
        """Outputs of n rows into out (n * n_outputs): value, P(y=1) or class probs."""
        nf, no = self.n_features, self.n_outputs
        for s in range(n):
            z = self._forward_one(params, X, s * nf)
            if self.out == OUT_SOFTMAX:
                _softmax_ce(z, no, 0)
            elif self.out == OUT_SIGMOID:
                z[0] = 1.0 / (1.0 + math.exp(-z[0]))
            for j in range(no):
                out[s * no + j] = z[j]
        return out

    def predict_one(self, params, X, s):
        """Class id (or value, for linear) of row s."""
        z = self._forward_one(params, X, s * self.n_features)
        if self.out == OUT_IDENTITY:
            return z[0]
        if self.out == OUT_SIGMOID:
            return 1 if z[0] > 0.0 else 0
        best = 0
        for j in range(1, self.n_outputs):
            if z[j] > z[best]:
                best = j
        return best
