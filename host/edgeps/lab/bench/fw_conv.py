"""`edgeps bench fw-conv`: the board conv1d step under MicroPython, per FLOP vs MLP.

Each model's loss + gradient step on a batch is timed as ``fw-kernels``
times it (``edgeps.lab.bench.fw_kernels``: the real MicroPython unix
binary, median of ``--repeat`` steps after an untimed one). A step's FLOPs
are 6 x the forward multiply-adds per sample x the batch (forward 2, the
two backward products 4); ``vs_mlp`` is the model's time per FLOP over the
MLP's. ``kept_bytes`` is the scratch the network holds after a step. The
peak heap of a whole board job is measured by tests/firmware/test_conv_memory.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from typing import Any

from edgeps.kernels import ModelSpec
from edgeps.lab.bench.fw_kernels import _count, _micropython
from edgeps.lab.bench.micropython import firmware_dir

MLP = "mlp:64-32-10"
MODELS = (
    "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10",
    "conv1d:3x64-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-6",
    "conv1d:3x64-c8k5p2-m4-c16k5p2-m4-6",
)
GOAL = 10.0  # the conv step within 10x of the MLP's time per FLOP


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--repeat", type=_count, default=9, help="timed steps (median)")
    parser.add_argument("--batch", type=_count, default=16, help="windows a step")
    parser.add_argument(
        "--models", default=",".join(MODELS), help="comma-separated conv1d specs"
    )


def run(args: argparse.Namespace) -> int:
    try:
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        specs = {m: ModelSpec.parse(m) for m in [MLP, *models]}
    except ValueError as exc:
        raise SystemExit(f"edgeps bench fw-conv: {exc}") from None
    cases = [(m, args.batch) for m in specs]
    firmware = firmware_dir().resolve()
    errors: dict[str, str] = {}
    try:
        times = _micropython(cases, args.repeat, "time", firmware)
        allocs = _micropython(cases, 1, "alloc", firmware)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        times, allocs = {}, {}
        errors["micropython"] = str(exc)
    rows: list[dict[str, Any]] = []
    for m, spec in specs.items():
        if (m, args.batch) not in times:
            continue
        ms = statistics.median(times[(m, args.batch)]) / 1e3
        flops = 6 * spec.macs * args.batch
        rows.append(
            {
                "model": m,
                "params": spec.n_params,
                "flops_per_step": flops,
                "step_ms": round(ms, 3),
                "ns_per_flop": round(ms * 1e6 / flops, 2),
                "kept_bytes": allocs.get((m, args.batch), [0, 0])[1],
            }
        )
    if rows and rows[0]["model"] == MLP:
        for r in rows:
            r["vs_mlp"] = round(r["ns_per_flop"] / rows[0]["ns_per_flop"], 2)
            r["goal_met"] = r["vs_mlp"] <= GOAL
    report = {
        "benchmark": "fw-conv",
        "batch": args.batch,
        "repeat": args.repeat,
        "rows": rows,
        "errors": errors,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0 if rows and not errors else 1


def _print_table(report: dict[str, Any]) -> None:
    print(
        f"board loss + gradient, batch {report['batch']}, MicroPython unix port, "
        f"median of {report['repeat']}; vs MLP: time per FLOP over the MLP's "
        f"(goal <= {GOAL:g}x)"
    )
    print(
        f"{'model':<48} {'params':>6} {'MFLOP':>7} {'step ms':>8} {'ns/FLOP':>8} "
        f"{'kept B':>7} {'vs MLP':>7}"
    )
    for r in report["rows"]:
        print(
            f"{r['model']:<48} {r['params']:>6} {r['flops_per_step'] / 1e6:>7.2f} "
            f"{r['step_ms']:>8.2f} {r['ns_per_flop']:>8.2f} {r['kept_bytes']:>7} "
            f"{r.get('vs_mlp', 0):>6.2f}x"
        )
    for name, err in report["errors"].items():
        print(f"{name}: failed: {err}")
