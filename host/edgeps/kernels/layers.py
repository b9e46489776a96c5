"""Layer lists of convolutional models: the spec text, shapes and the flat layout.

A conv model is ``conv1d:<C>x<L>-<layer>-...-<classes>`` (windows of C channels
by L samples) or ``conv2d:<C>x<H>x<W>-<layer>-...-<classes>`` (images). Layers:

- ``c<N>k<K>[s<S>][p<P>]``: convolution, N filters of width K (K x K in 2-D),
  stride S (1), zero padding P (0) on each side, then ReLU;
- ``m<K>[s<S>]`` / ``a<K>[s<S>]``: max / average pooling over K (K x K),
  stride S (default K), no padding;
- ``d<N>``: dense layer of N units on the flattened input, then ReLU;
- the last token, a bare number: the dense output layer over the classes
  (softmax cross-entropy).

Parameters are one flat float32 vector, layer by layer: a convolution's W
(N, C, K) or (N, C, K, K) row-major, then its b (N); a dense layer's W
(n_in, n_out) row-major, then b (n_out). A layer's input is flattened in
(C, L) or (C, H, W) order, channel first, as ONNX and PyTorch lay it out.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

OPS = ("conv", "maxpool", "avgpool", "dense")
MAX_LAYERS = 32
_TOKEN = re.compile(
    r"^(?:(c)(\d+)k(\d+)(?:s(\d+))?(?:p(\d+))?|([ma])(\d+)(?:s(\d+))?|d(\d+)|(\d+))$"
)


@dataclass(frozen=True)
class Layer:
    """One layer as the spec text names it (shapes come from the input)."""

    op: str
    n_out: int = 0  # conv filters, dense units (0 for pools)
    k: int = 1  # kernel or pool width
    stride: int = 1
    pad: int = 0
    relu: bool = True  # conv and hidden dense layers; False for the output

    def text(self) -> str:
        if self.op == "conv":
            s = f"c{self.n_out}k{self.k}"
            s += f"s{self.stride}" if self.stride != 1 else ""
            return s + (f"p{self.pad}" if self.pad else "")
        if self.op in ("maxpool", "avgpool"):
            s = ("m" if self.op == "maxpool" else "a") + str(self.k)
            return s + (f"s{self.stride}" if self.stride != self.k else "")
        return f"d{self.n_out}" if self.relu else str(self.n_out)


@dataclass(frozen=True)
class Op:
    """A layer placed in a model: shapes in and out and its parameter slices."""

    layer: Layer
    in_shape: tuple[int, ...]  # (C, L), (C, H, W) or (N,)
    out_shape: tuple[int, ...]
    w: slice  # empty for pools
    w_shape: tuple[int, ...]
    b: slice

    @property
    def op(self) -> str:
        return self.layer.op

    @property
    def n_params(self) -> int:
        return (self.w.stop - self.w.start) + (self.b.stop - self.b.start)

    @property
    def macs(self) -> int:
        """Multiply-adds per sample of this layer's forward pass."""
        if self.op == "conv":
            return math.prod(self.out_shape) * math.prod(self.w_shape[1:])
        if self.op == "dense":
            return self.w_shape[0] * self.w_shape[1]
        return math.prod(self.out_shape) * self.layer.k ** (len(self.in_shape) - 1)


def parse_layers(text: str) -> tuple[tuple[int, ...], tuple[Layer, ...]]:
    """``3x64-c8k5p2-m2-d32-4`` -> ((3, 64), layers); ValueError on bad text."""
    tokens = text.strip().split("-")
    if len(tokens) < 2:
        raise ValueError("expected <shape>-<layers>-<classes>")
    try:
        shape = tuple(int(v) for v in tokens[0].split("x"))
    except ValueError:
        raise ValueError(f"bad input shape {tokens[0]!r}") from None
    layers = []
    for i, tok in enumerate(tokens[1:]):
        m = _TOKEN.match(tok)
        if m is None:
            raise ValueError(
                f"bad layer {tok!r}: expected c<N>k<K>[s<S>][p<P>], m<K>[s<S>], "
                "a<K>[s<S>], d<N> or the class count"
            )
        last = i == len(tokens) - 2
        if m.group(1):
            n, k = int(m.group(2)), int(m.group(3))
            s = int(m.group(4)) if m.group(4) else 1
            p = int(m.group(5)) if m.group(5) else 0
            layers.append(Layer("conv", n, k, s, p))
        elif m.group(6):
            k = int(m.group(7))
            s = int(m.group(8)) if m.group(8) else k
            layers.append(Layer("maxpool" if m.group(6) == "m" else "avgpool", 0, k, s))
        elif m.group(9):
            layers.append(Layer("dense", int(m.group(9))))
        else:
            if not last:
                raise ValueError(f"a bare number ({tok}) must be the last layer")
            layers.append(Layer("dense", int(m.group(10)), relu=False))
        if last and layers[-1].relu:
            raise ValueError("the last layer must be the class count, e.g. -10")
    return shape, tuple(layers)


def _out_len(n: int, k: int, s: int, p: int, what: str) -> int:
    span = n + 2 * p - k
    if span < 0:
        raise ValueError(f"{what}: width {k} is wider than its input {n} (+2x{p} pad)")
    return span // s + 1


def plan_ops(
    kind: str, in_shape: tuple[int, ...], layers: tuple[Layer, ...], max_dim: int
) -> tuple[Op, ...]:
    """Shapes and parameter slices of every layer; ValueError if they do not fit."""
    dims = 1 if kind == "conv1d" else 2
    if len(in_shape) != dims + 1:
        raise ValueError(
            f"{kind} takes a {'CxL' if dims == 1 else 'CxHxW'} input shape, "
            f"got {'x'.join(map(str, in_shape))}"
        )
    if not 1 <= len(layers) <= MAX_LAYERS:
        raise ValueError(f"a model has 1 to {MAX_LAYERS} layers")
    for v in in_shape:
        if not 1 <= v <= max_dim:
            raise ValueError(f"input dimensions must be in [1, {max_dim}]")
    ops = []
    shape = tuple(in_shape)
    off = 0
    for i, ly in enumerate(layers):
        what = f"layer {i + 1} ({ly.text()})"
        for v, name in ((ly.k, "width"), (ly.stride, "stride")):
            if not 1 <= v <= max_dim:
                raise ValueError(f"{what}: {name} must be in [1, {max_dim}]")
        if not 0 <= ly.pad < ly.k:
            raise ValueError(f"{what}: padding must be below the kernel width")
        if ly.op in ("conv", "dense") and not 1 <= ly.n_out <= max_dim:
            raise ValueError(f"{what}: width must be in [1, {max_dim}]")
        if ly.op == "dense":
            n_in = math.prod(shape)
            out: tuple[int, ...] = (ly.n_out,)
            w_shape: tuple[int, ...] = (n_in, ly.n_out)
            n_b = ly.n_out
        else:
            if len(shape) != dims + 1:
                raise ValueError(f"{what}: comes after a dense layer")
            sp = tuple(_out_len(n, ly.k, ly.stride, ly.pad, what) for n in shape[1:])
            if ly.op == "conv":
                out = (ly.n_out, *sp)
                w_shape = (ly.n_out, shape[0]) + (ly.k,) * dims
                n_b = ly.n_out
            else:
                out = (shape[0], *sp)
                w_shape = ()
                n_b = 0
        n_w = math.prod(w_shape) if w_shape else 0
        ops.append(
            Op(
                ly,
                shape,
                out,
                slice(off, off + n_w),
                w_shape,
                slice(off + n_w, off + n_w + n_b),
            )
        )
        off += n_w + n_b
        shape = out
    if layers[-1].op != "dense" or layers[-1].relu:
        raise ValueError("the last layer must be the dense output over the classes")
    if layers[-1].n_out < 2:
        raise ValueError("a conv model needs at least 2 classes")
    return tuple(ops)


def lenet5(in_shape: tuple[int, ...], n_classes: int) -> str:
    """LeNet-5's layers for this image shape: two conv+pool stages, three dense."""
    pad = 2 if in_shape[1:] == (28, 28) else 0
    head = "x".join(map(str, in_shape))
    first = f"c6k5p{pad}" if pad else "c6k5"
    return f"conv2d:{head}-{first}-m2-c16k5-m2-d120-d84-{n_classes}"


def default_conv1d(in_shape: tuple[int, ...], n_classes: int) -> str:
    """A sound 1-D network for windows of this shape, small enough for a board.

    Up to three stages of 12 filters (16 for 3 channels or more) of width 5,
    each halving the length (while the window is 8 samples or longer), then
    the dense output layer: a board job of it for 1 or 2 channels completes
    in a 96K heap (firmware/README.md).
    """
    c, length = in_shape
    n = 12 if c < 3 else 16
    parts = []
    for _ in range(3):
        if length < 8:
            break
        parts.append(f"c{n}k5p2-m2")
        length //= 2
    if not parts:
        parts.append(f"c{n}k{min(3, length)}")
    return f"conv1d:{c}x{in_shape[1]}-" + "-".join(parts) + f"-{n_classes}"


def default_conv2d(in_shape: tuple[int, ...], n_classes: int) -> str:
    """A small 2-D network: two conv+pool stages and a dense layer."""
    head = "x".join(map(str, in_shape))
    if min(in_shape[1:]) >= 12:
        return f"conv2d:{head}-c8k3p1-m2-c16k3p1-m2-d64-{n_classes}"
    return f"conv2d:{head}-c8k3p1-d32-{n_classes}"
