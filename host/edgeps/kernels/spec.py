"""ModelSpec: the model family, its sizes, and the flat parameter layout."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from edgeps.kernels.layers import Layer, Op, parse_layers, plan_ops

KINDS = ("linear", "logistic", "softmax", "mlp", "conv1d", "conv2d")
CONV_KINDS = ("conv1d", "conv2d")
ACTIVATIONS = ("relu", "tanh")
# one bound for every dimension keeps C index arithmetic far from int32 overflow
MAX_DIM = 1 << 20
MAX_PARAMS = 1 << 28


def _as_dim(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not 1 <= int(value) <= MAX_DIM:
        raise ValueError(f"{name} must be in [1, {MAX_DIM}], got {value}")
    return int(value)


@dataclass(frozen=True)
class ModelSpec:
    """A model family plus sizes; params are one flat float32 vector of n_params.

    Layout: layers in order, each W (n_in, n_out) row-major then b (n_out).
    Conv kinds (``conv1d``, ``conv2d``) carry their input shape and layer list
    (``edgeps.kernels.layers`` says their layout); a sample is still one row
    of ``n_features`` = C*L (or C*H*W) values, channel first.
    """

    kind: str
    n_features: int
    n_classes: int = 1
    hidden: tuple[int, ...] = ()
    activation: str = "relu"
    in_shape: tuple[int, ...] = ()
    layers: tuple[Layer, ...] = ()
    _hash: int = field(init=False, repr=False, compare=False, default=0)
    # derived once: the kernels read them on every call
    _n_params: int = field(init=False, repr=False, compare=False, default=0)
    _slices: tuple[tuple[slice, tuple[int, int], slice], ...] = field(
        init=False, repr=False, compare=False, default=()
    )
    _ops: tuple[Op, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind in CONV_KINDS:
            self._init_conv()
            return
        if self.in_shape or self.layers:
            raise ValueError(f"{self.kind} has no input shape or layer list")
        _as_dim("n_features", self.n_features)
        _as_dim("n_classes", self.n_classes)
        if not isinstance(self.hidden, (tuple, list)):
            raise TypeError("hidden must be a tuple of ints")
        hidden = tuple(_as_dim("hidden size", h) for h in self.hidden)
        object.__setattr__(self, "hidden", hidden)
        object.__setattr__(self, "n_features", int(self.n_features))
        object.__setattr__(self, "n_classes", int(self.n_classes))
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}")
        if self.kind in ("linear", "logistic") and self.n_classes != 1:
            raise ValueError(f"{self.kind} has n_classes 1, got {self.n_classes}")
        if self.kind in ("softmax", "mlp") and self.n_classes < 2:
            raise ValueError(f"{self.kind} needs n_classes >= 2")
        if self.kind == "mlp":
            if not 1 <= len(hidden) <= 2:
                raise ValueError("mlp needs one or two hidden layers")
        else:
            if hidden:
                raise ValueError(f"{self.kind} has no hidden layers")
            if self.activation != "relu":
                raise ValueError(f"{self.kind} has no activation to choose")
        sizes = self.layer_sizes
        slices = []
        off = 0
        for a, b in zip(sizes[:-1], sizes[1:], strict=True):
            slices.append(
                (slice(off, off + a * b), (a, b), slice(off + a * b, off + a * b + b))
            )
            off += a * b + b
        object.__setattr__(self, "_slices", tuple(slices))
        object.__setattr__(self, "_n_params", off)
        if self.n_params > MAX_PARAMS:
            raise ValueError(f"model too large: {self.n_params} params")
        # hashed on every kernel call (per-spec caches), so compute it once
        object.__setattr__(
            self,
            "_hash",
            hash((self.kind, self.n_features, self.n_classes, hidden, self.activation)),
        )

    def _init_conv(self) -> None:
        shape = tuple(_as_dim("input dimension", v) for v in self.in_shape)
        if not all(isinstance(ly, Layer) for ly in self.layers):
            raise TypeError("layers must be a tuple of Layer")
        if self.hidden or self.activation != "relu":
            raise ValueError(f"{self.kind} names its layers in the layer list")
        ops = plan_ops(self.kind, shape, tuple(self.layers), MAX_DIM)
        n_features = int(np.prod(shape))
        if _as_dim("n_features", self.n_features) != n_features:
            raise ValueError(
                f"n_features {self.n_features} does not match the input shape "
                f"{'x'.join(map(str, shape))}"
            )
        if _as_dim("n_classes", self.n_classes) != ops[-1].layer.n_out:
            raise ValueError("n_classes must be the output layer's width")
        object.__setattr__(self, "in_shape", shape)
        object.__setattr__(self, "layers", tuple(self.layers))
        object.__setattr__(self, "n_features", n_features)
        object.__setattr__(self, "n_classes", int(self.n_classes))
        object.__setattr__(self, "_ops", ops)
        object.__setattr__(self, "_n_params", ops[-1].b.stop)
        if self.n_params > MAX_PARAMS:
            raise ValueError(f"model too large: {self.n_params} params")
        object.__setattr__(self, "_hash", hash((self.kind, shape, tuple(self.layers))))

    @classmethod
    def conv(
        cls, kind: str, in_shape: tuple[int, ...], layers: tuple[Layer, ...]
    ) -> ModelSpec:
        """A conv1d or conv2d spec from its input shape and layers."""
        if kind not in CONV_KINDS or not layers:
            raise ValueError(f"kind must be one of {CONV_KINDS}, with layers")
        n = int(np.prod([int(v) for v in in_shape])) if in_shape else 0
        return cls(kind, n, layers[-1].n_out, in_shape=tuple(in_shape), layers=layers)

    @property
    def is_conv(self) -> bool:
        return self.kind in CONV_KINDS

    @property
    def ops(self) -> tuple[Op, ...]:
        """The layers with their shapes and parameter slices (conv kinds only)."""
        return self._ops

    @property
    def macs(self) -> int:
        """Multiply-adds of one sample's forward pass."""
        if self.is_conv:
            return sum(op.macs for op in self._ops)
        return sum(a * b for _, (a, b), _ in self._slices)

    def __hash__(self) -> int:
        return self._hash

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """Widths from input to output: (n_features, *hidden, n_out); dense kinds."""
        if self.is_conv:
            raise ValueError(f"{self.kind} has layers, not widths: use spec.ops")
        return (self.n_features, *self.hidden, self.n_classes)

    @property
    def n_params(self) -> int:
        return self._n_params

    def layer_slices(self) -> list[tuple[slice, tuple[int, int], slice]]:
        """Per layer: (slice of W, W shape, slice of b) into the flat vector."""
        return list(self._slices)

    def init_params(self, seed: int) -> np.ndarray:
        """Glorot-uniform weights (He for relu hidden layers), zero biases."""
        rng = np.random.default_rng(seed)
        p = np.zeros(self.n_params, dtype=np.float32)
        if self.is_conv:
            for op in self._ops:
                if not op.w_shape:
                    continue
                fan_in = (
                    int(np.prod(op.w_shape[1:])) if op.op == "conv" else op.w_shape[0]
                )
                fan_out = op.w_shape[0] if op.op == "conv" else op.w_shape[1]
                if op.layer.relu:
                    limit = np.sqrt(6.0 / fan_in)
                else:
                    limit = np.sqrt(6.0 / (fan_in + fan_out))
                n = op.w.stop - op.w.start
                p[op.w] = rng.uniform(-limit, limit, size=n).astype(np.float32)
            return p
        n_layers = len(self.layer_sizes) - 1
        for i, (ws, (a, b), _) in enumerate(self.layer_slices()):
            if self.kind == "mlp" and self.activation == "relu" and i < n_layers - 1:
                limit = np.sqrt(6.0 / a)
            else:
                limit = np.sqrt(6.0 / (a + b))
            p[ws] = rng.uniform(-limit, limit, size=a * b).astype(np.float32)
        return p

    def __str__(self) -> str:
        if self.is_conv:
            head = "x".join(str(v) for v in self.in_shape)
            return f"{self.kind}:{head}-" + "-".join(ly.text() for ly in self.layers)
        if self.kind in ("linear", "logistic"):
            return f"{self.kind}:{self.n_features}"
        if self.kind == "softmax":
            return f"softmax:{self.n_features}x{self.n_classes}"
        text = "mlp:" + "-".join(str(s) for s in self.layer_sizes)
        return text + (":tanh" if self.activation == "tanh" else "")

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """Read the compact form: linear:8, softmax:64x10, mlp:64-32-10[:tanh]."""
        if not isinstance(text, str):
            raise TypeError("model spec must be a string")
        parts = text.strip().split(":")
        kind = parts[0]
        try:
            if kind in CONV_KINDS and len(parts) == 2:
                shape, layers = parse_layers(parts[1])
                return cls.conv(kind, shape, layers)
            if kind in ("linear", "logistic") and len(parts) == 2:
                return cls(kind, int(parts[1]))
            if kind == "softmax" and len(parts) == 2:
                f, c = parts[1].split("x")
                return cls("softmax", int(f), int(c))
            if kind == "mlp" and len(parts) in (2, 3):
                sizes = [int(s) for s in parts[1].split("-")]
                act = parts[2] if len(parts) == 3 else "relu"
                if len(sizes) < 3:
                    raise ValueError("mlp needs input-hidden-...-classes")
                return cls("mlp", sizes[0], sizes[-1], tuple(sizes[1:-1]), act)
        except ValueError as exc:
            raise ValueError(f"bad model spec {text!r}: {exc}") from None
        raise ValueError(
            f"bad model spec {text!r}; expected e.g. linear:8, logistic:32, "
            "softmax:64x10, mlp:64-32-10, mlp:64-32-16-10:tanh, "
            "conv1d:3x64-c16k5p2-m2-d32-4, "
            "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10"
        )
