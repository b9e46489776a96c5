"""`edgeps bench kernels`: C vs numpy per-call time for every kernel family.

Each case runs both backends on the same inputs, interleaving their samples
so that machine noise hits both alike; a sample times a burst of calls
(about half a millisecond) and the reported figure is the median over
samples of the time per call. speedup = numpy time / C time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from edgeps.kernels import Kernels, ModelSpec, get_backend

MODELS = ("logistic:32", "softmax:64x10", "mlp:64-32-10", "mlp:64-32-10:tanh")
BATCHES = (32, 1024)
VECTOR_SIZES = (2410, 100_000)


@dataclass
class Row:
    group: str
    case: str
    size: str
    numpy_us: float
    c_us: float

    @property
    def speedup(self) -> float:
        return self.numpy_us / self.c_us if self.c_us > 0 else float("nan")


def _burst(fn: Callable[[], object], clock: Callable[[], float]) -> int:
    """Calls per sample so that one sample takes about half a millisecond."""
    t0 = clock()
    fn()
    one = max(clock() - t0, 1e-7)
    return max(1, min(1000, int(5e-4 / one)))


def _compare(
    fns: dict[str, Callable[[], object]],
    repeat: int,
    warmup: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Median microseconds per call for each named function, interleaved."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    bursts = {k: _burst(fn, clock) for k, fn in fns.items()}
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            n = bursts[k]
            t0 = clock()
            for _ in range(n):
                fn()
            samples[k].append((clock() - t0) / n * 1e6)
    return {k: statistics.median(v) for k, v in samples.items()}


def _loss_call(
    k: Kernels,
    spec: ModelSpec,
    p: np.ndarray,
    X: np.ndarray,
    y: np.ndarray,
    g: np.ndarray,
) -> Callable[[], object]:
    return lambda: k.loss_and_grad(spec, p, X, y, g)


def _vector_calls(
    k: Kernels,
    bufs: list[np.ndarray],
    x: np.ndarray,
    g: np.ndarray,
    q16: np.ndarray,
    q8: tuple[np.ndarray, np.ndarray],
) -> dict[str, Callable[[], object]]:
    p, vel, m, v, r = bufs
    return {
        "sgd_step": lambda: k.sgd_step(p, g, 1e-3),
        "momentum_step": lambda: k.momentum_step(p, g, vel, 1e-3, 0.9),
        "adam_step": lambda: k.adam_step(p, g, m, v, 10, 1e-3),
        "l2_norm": lambda: k.l2_norm(x),
        "clip_norm_": lambda: k.clip_norm_(p, 1e9),
        "all_finite": lambda: k.all_finite(x),
        "fp16_quantize+ef": lambda: k.fp16_quantize(g, r),
        "fp16_dequantize": lambda: k.fp16_dequantize(q16),
        "int8_quantize+ef": lambda: k.int8_quantize(g, 64, r),
        "int8_dequantize": lambda: k.int8_dequantize(q8[0], q8[1], 64),
    }


def _model_rows(
    ks: dict[str, Kernels], repeat: int, warmup: int, batches: tuple[int, ...]
) -> list[Row]:
    rows = []
    for text in MODELS:
        spec = ModelSpec.parse(text)
        for b in batches:
            rng = np.random.default_rng(b)
            X = rng.standard_normal((b, spec.n_features)).astype(np.float32)
            n = 2 if spec.kind == "logistic" else spec.n_classes
            y = rng.integers(0, n, b).astype(np.int32)
            p = spec.init_params(0)
            g = np.empty_like(p)
            fns = {name: _loss_call(k, spec, p, X, y, g) for name, k in ks.items()}
            t = _compare(fns, repeat, warmup)
            rows.append(Row("loss+grad", text, f"B={b}", t["numpy"], t["c"]))
    return rows


def _vector_rows(
    ks: dict[str, Kernels], repeat: int, warmup: int, sizes: tuple[int, ...]
) -> list[Row]:
    rows = []
    for n in sizes:
        rng = np.random.default_rng(n)
        x = rng.standard_normal(n).astype(np.float32)
        g = (rng.standard_normal(n) * 1e-2).astype(np.float32)
        q16 = ks["numpy"].fp16_quantize(x)
        per = {
            name: _vector_calls(
                k,
                [np.zeros(n, np.float32) for _ in range(5)],
                x,
                g,
                q16,
                k.int8_quantize(x, 64),
            )
            for name, k in ks.items()
        }
        for case in per["numpy"]:
            fns = {name: per[name][case] for name in ks}
            t = _compare(fns, repeat, warmup)
            group = "optimizer" if case.endswith("_step") else "update"
            rows.append(Row(group, case, f"n={n}", t["numpy"], t["c"]))
    return rows


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--repeat", type=_count(1), default=31, help="timed samples per case (median)"
    )
    parser.add_argument(
        "--warmup", type=_count(0), default=20, help="untimed calls first"
    )
    parser.add_argument(
        "--only", choices=("models", "vectors"), help="run one part of the table"
    )


def run(args: argparse.Namespace) -> int:
    try:
        ks = {"numpy": get_backend("numpy"), "c": get_backend("c")}
    except ImportError as exc:
        print(f"C kernels unavailable, nothing to compare: {exc}")
        return 1
    rows: list[Row] = []
    if args.only in (None, "models"):
        rows += _model_rows(ks, args.repeat, args.warmup, BATCHES)
    if args.only in (None, "vectors"):
        rows += _vector_rows(ks, args.repeat, args.warmup, VECTOR_SIZES)
    if args.json:
        out = [dict(asdict(r), speedup=r.speedup) for r in rows]
        print(json.dumps({"repeat": args.repeat, "rows": out}, indent=2))
        return 0
    print(
        f"{'group':<10} {'case':<20} {'size':<9} {'numpy us':>10} {'C us':>9} "
        f"{'speedup':>8}"
    )
    for r in rows:
        print(
            f"{r.group:<10} {r.case:<20} {r.size:<9} {r.numpy_us:>10.2f} "
            f"{r.c_us:>9.2f} {r.speedup:>7.2f}x"
        )
    print("speedup = numpy time / C time; median per-call time over samples")
    return 0
