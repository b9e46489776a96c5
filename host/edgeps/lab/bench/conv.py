"""`edgeps bench conv`: conv kernels, C vs numpy vs PyTorch, per step and per layer.

At edge sizes (the default conv1d on 1x40 and 6x100 windows, LeNet-5 on
28x28 images; batch 1, 8, 32): one training step (forward, loss, backward,
``loss_and_grad``), one forward pass (class probabilities), and each layer's
forward and forward+backward alone. PyTorch runs its CPU kernels on one
thread (``torch.set_num_threads(1)``), functional ops on the same flat
parameters; it is optional (a bench-only dependency) and its column stays
empty without it. Timing as in ``edgeps bench kernels``: interleaved bursts,
the median per call; ``--clock cpu`` counts the process's CPU time instead
of wall time, for a loaded machine (run numpy single-threaded then, e.g.
OPENBLAS_NUM_THREADS=1, so that every column is one thread's work).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec, _np_conv, get_backend
from edgeps.kernels.layers import Op
from edgeps.lab.bench.kernels import _compare, _count

MODELS = (
    ("conv1d 1x40", "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10"),
    ("conv1d 6x100", "conv1d:6x100-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-6"),
    ("lenet5 28x28", "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10"),
)
BATCHES = (1, 8, 32)
NO_TORCH = "PyTorch not installed: no torch column (pip install 'edgeps[bench-torch]')"


@dataclass
class Row:
    model: str
    case: str
    batch: int
    numpy_us: float
    c_us: float
    torch_us: float | None

    @property
    def vs_numpy(self) -> float:
        return self.numpy_us / self.c_us

    @property
    def vs_torch(self) -> float | None:
        return None if self.torch_us is None else self.torch_us / self.c_us


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


# ---- numpy: the reference layers, forward and backward ----
def _np_layer(op: Op, p: np.ndarray, x: np.ndarray) -> np.ndarray:
    if op.op == "conv":
        y = _np_conv.conv_forward(op, p[op.w].reshape(op.w_shape), p[op.b], x)
    elif op.op == "dense":
        y = x.reshape(x.shape[0], -1) @ p[op.w].reshape(op.w_shape) + p[op.b]
    else:
        return _np_conv.pool_forward(op, x)
    return np.maximum(y, 0, out=y) if op.layer.relu else y


def _np_layer_step(
    op: Op, p: np.ndarray, x: np.ndarray, dy: np.ndarray, g: np.ndarray, first: bool
) -> None:
    y = _np_layer(op, p, x)
    if op.op != "conv" and op.op != "dense":
        _np_conv.pool_backward(op, x, y, dy)
        return
    d = dy * (y > 0) if op.layer.relu else dy
    W = p[op.w].reshape(op.w_shape)
    if op.op == "conv":
        gW = g[op.w].reshape(op.w_shape)
        _np_conv.conv_backward(op, W, x, d, gW, g[op.b], not first)
        return
    xf = x.reshape(x.shape[0], -1)
    g[op.w] = (xf.T @ d).reshape(-1)
    g[op.b] = d.sum(axis=0)
    if not first:
        (d @ W.T).reshape(x.shape)


# ---- PyTorch: functional ops on tensors made from the flat parameters ----
class _TorchNet:
    def __init__(self, torch: Any, spec: ModelSpec, p: np.ndarray) -> None:
        self.t, self.F, self.spec = torch, torch.nn.functional, spec
        self.dims = len(spec.in_shape) - 1
        self.w: list[Any] = []
        self.b: list[Any] = []
        for op in spec.ops:
            w = b = None
            if op.op in ("conv", "dense"):
                w = torch.tensor(p[op.w].reshape(op.w_shape), requires_grad=True)
                b = torch.tensor(p[op.b], requires_grad=True)
            self.w.append(w)
            self.b.append(b)
        self.leaves = [v for v in self.w + self.b if v is not None]

    def layer(self, i: int, x: Any) -> Any:
        op, F = self.spec.ops[i], self.F
        ly, two = op.layer, self.dims == 2
        if op.op == "conv":
            conv = F.conv2d if two else F.conv1d
            y = conv(x, self.w[i], self.b[i], stride=ly.stride, padding=ly.pad)
        elif op.op == "maxpool":
            return (F.max_pool2d if two else F.max_pool1d)(x, ly.k, ly.stride)
        elif op.op == "avgpool":
            return (F.avg_pool2d if two else F.avg_pool1d)(x, ly.k, ly.stride)
        else:
            y = self.t.addmm(self.b[i], x.flatten(1), self.w[i])
        return F.relu(y) if ly.relu else y

    def logits(self, X: Any) -> Any:
        h = X.reshape(X.shape[0], *self.spec.in_shape)
        for i in range(len(self.spec.ops)):
            h = self.layer(i, h)
        return h

    def step(self, X: Any, y: Any) -> Any:
        loss = self.F.cross_entropy(self.logits(X), y)
        return self.t.autograd.grad(loss, self.leaves)

    def forward(self, X: Any) -> Any:
        with self.t.no_grad():
            return self.t.softmax(self.logits(X), dim=1)


# ---- C: whole-net calls through the backend, layers through the library ----
def _c_layer_calls(
    spec: ModelSpec, p: np.ndarray, acts: list[np.ndarray], dys: list[np.ndarray]
) -> tuple[list[Callable[[], object]], list[Callable[[], object]]]:
    from edgeps._native import ffi, lib
    from edgeps.kernels.c_backend import net_struct

    net = net_struct(spec)
    B = acts[0].shape[0]
    scratch = ffi.new("float[]", lib.eps_net_scratch_length(net, B))
    g = np.zeros(spec.n_params, np.float32)
    buf = [ffi.from_buffer("float[]", a) for a in acts]
    dyb = [ffi.from_buffer("float[]", d) for d in dys]
    outs = [np.empty_like(a) for a in acts[1:]]
    ob = [ffi.from_buffer("float[]", o) for o in outs]
    dxs = [ffi.from_buffer("float[]", np.empty_like(a)) for a in acts[:-1]]
    pb, gb = ffi.from_buffer("float[]", p), ffi.from_buffer("float[]", g)

    def fwd(i: int) -> Callable[[], object]:
        return lambda: lib.eps_net_layer_forward(net, i, pb, buf[i], B, ob[i], scratch)

    def both(i: int) -> Callable[[], object]:
        dx = dxs[i] if i > 0 else ffi.NULL

        def call() -> None:
            lib.eps_net_layer_forward(net, i, pb, buf[i], B, ob[i], scratch)
            lib.eps_net_layer_backward(
                net, i, pb, buf[i], ob[i], dyb[i], B, gb, dx, scratch
            )

        return call

    n = len(spec.ops)
    return [fwd(i) for i in range(n)], [both(i) for i in range(n)]


def _rows_for(
    name: str,
    spec: ModelSpec,
    b: int,
    torch: Any,
    args: argparse.Namespace,
) -> list[Row]:
    ck, nk = get_backend("c"), get_backend("numpy")
    rng = np.random.default_rng(b)
    X = rng.standard_normal((b, spec.n_features)).astype(np.float32)
    y = rng.integers(0, spec.n_classes, b).astype(np.int32)
    p = spec.init_params(0)
    g = np.empty_like(p)
    tn = _TorchNet(torch, spec, p) if torch is not None else None
    tX = torch.from_numpy(X) if torch is not None else None
    ty = torch.from_numpy(y.astype(np.int64)) if torch is not None else None
    cases: list[tuple[str, dict[str, Callable[[], object]]]] = []

    def case(label: str, np_fn: Any, c_fn: Any, t_fn: Any) -> None:
        fns = {"numpy": np_fn, "c": c_fn}
        if t_fn is not None:
            fns["torch"] = t_fn
        cases.append((label, fns))

    case(
        "train step",
        lambda: nk.loss_and_grad(spec, p, X, y, g),
        lambda: ck.loss_and_grad(spec, p, X, y, g),
        (lambda: tn.step(tX, ty)) if tn is not None else None,
    )
    case(
        "forward",
        lambda: nk.forward(spec, p, X),
        lambda: ck.forward(spec, p, X),
        (lambda: tn.forward(tX)) if tn is not None else None,
    )
    if args.only != "steps":
        acts = [
            np.ascontiguousarray(a, np.float32)
            for a in _np_conv.hidden_forward(spec.ops, p, X)
        ]
        dys = [rng.standard_normal(a.shape).astype(np.float32) for a in acts[1:]]
        c_fwd, c_both = _c_layer_calls(spec, p, acts, dys)
        for i, op in enumerate(spec.ops):
            label = f"L{i + 1} {op.layer.text()}"
            x, dy = acts[i], dys[i]
            t_f = t_b = None
            if tn is not None:
                tx = torch.from_numpy(x).requires_grad_(i > 0)
                tdy = torch.from_numpy(dy)
                wrt = [v for v in (tx, tn.w[i], tn.b[i]) if v is not None]
                wrt = [v for v in wrt if v.requires_grad]

                def t_f(i: int = i, tx: Any = tx) -> object:
                    with torch.no_grad():
                        return tn.layer(i, tx)

                def t_b(
                    i: int = i, tx: Any = tx, tdy: Any = tdy, wrt: Any = wrt
                ) -> object:
                    out = tn.layer(i, tx)
                    return torch.autograd.grad(out, wrt, tdy) if wrt else out

            case(
                label + " fwd",
                lambda op=op, x=x: _np_layer(op, p, x),
                c_fwd[i],
                t_f,
            )
            case(
                label + " fwd+bwd",
                lambda op=op, x=x, dy=dy, i=i: _np_layer_step(op, p, x, dy, g, i == 0),
                c_both[i],
                t_b,
            )
    rows = []
    for label, fns in cases:
        clock = time.process_time if args.clock == "cpu" else time.perf_counter
        t = _compare(fns, args.repeat, args.warmup, clock)
        rows.append(Row(name, label, b, t["numpy"], t["c"], t.get("torch")))
    return rows


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--repeat", type=_count(1), default=21, help="timed samples per case (median)"
    )
    parser.add_argument(
        "--warmup", type=_count(0), default=10, help="untimed calls first"
    )
    parser.add_argument(
        "--only", choices=("steps", "layers"), help="whole-model rows or layer rows"
    )
    parser.add_argument(
        "--batch", type=_count(1), action="append", help="batch sizes (1, 8, 32)"
    )
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="wall time, or the process's CPU time (on a loaded machine)",
    )


def _fmt(v: float | None, unit: str = "") -> str:
    return "-" if v is None else f"{v:.2f}{unit}"


def run(args: argparse.Namespace) -> int:
    try:
        get_backend("c")
        from edgeps._native import lib  # noqa: F401
    except ImportError as exc:
        print(f"C kernels unavailable, nothing to compare: {exc}")
        return 1
    torch = _torch()
    if torch is None and not args.json:
        print(NO_TORCH)
    rows: list[Row] = []
    for name, text in MODELS:
        spec = ModelSpec.parse(text)
        for b in args.batch or BATCHES:
            got = _rows_for(name, spec, b, torch, args)
            if args.only == "layers":
                got = [r for r in got if r.case.startswith("L")]
            rows += got
    if args.json:
        out = [dict(asdict(r), vs_numpy=r.vs_numpy, vs_torch=r.vs_torch) for r in rows]
        info = {
            "torch": None if torch is None else torch.__version__,
            "clock": args.clock,
        }
        print(json.dumps({"repeat": args.repeat, **info, "rows": out}, indent=2))
        return 0
    print(
        f"{'model':<13} {'case':<24} {'B':>3} {'numpy us':>10} {'C us':>9} "
        f"{'torch us':>9} {'vs numpy':>9} {'vs torch':>9}"
    )
    for r in rows:
        print(
            f"{r.model:<13} {r.case:<24} {r.batch:>3} {r.numpy_us:>10.1f} "
            f"{r.c_us:>9.1f} {_fmt(r.torch_us):>9} {_fmt(r.vs_numpy, 'x'):>9} "
            f"{_fmt(r.vs_torch, 'x'):>9}"
        )
    print(
        "vs numpy = numpy time / C time, vs torch = torch time / C time (above 1: C "
        f"faster); torch on 1 thread; median per-call {args.clock} time over samples"
    )
    return 0
