"""`edgeps bench fw-feedback`: what the board's UPDATE codecs cost in accuracy.

One board trains alone under the real MicroPython unix binary: the firmware's
KernelTrainer on an IID shard of the dataset (EPSD file), each step's
gradient encoded by ``trainer.encode_grad`` in the codec under test, decoded
back by ``codec_read.write_params`` (what the host would apply) and applied
as plain SGD on the board. Rows: f32, f16 (no error feedback), i8 with its
residual kept as int8 (the board's default), i8 with a float32 residual (the
host kernels' bytes), i8 without error feedback (the residual dropped every
step). The final parameters are scored by the host's numpy kernels on the
test split; median of ``--seeds`` runs. Same data, order and initial
parameters for every row of a seed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec, get_backend
from edgeps.lab.bench.micropython import firmware_dir, micropython_path
from edgeps.workloads.datasets import load_dataset, partition_iid

# name -> (dtype code, residual keep, error feedback)
ROWS = {
    "f32": (1, "i8", True),
    "f16": (2, "i8", True),
    "i8": (3, "i8", True),
    "i8-f32res": (3, "f32", True),
    "i8-noef": (3, "i8", False),
}
DEADLINE = 600.0

SCRIPT = """
import sys
from array import array
from edgeps_worker import codec_read
from edgeps_worker.data import FileSource
from edgeps_worker.trainer import KernelTrainer


def main(spec, data, init, out, code, keep, ef, steps, lr, batch, seed):
    t = KernelTrainer(spec, FileSource(data, seed), batch, None, keep)
    with open(init, "rb") as f:
        t.params[:] = array("f", f.read())
    upd = array("f", bytes(4 * t.n_params))
    p = t.params
    for _ in range(steps):
        t.step()
        if not ef and t.codec is not None:
            t.codec.reset()
        if code == 1:
            upd = t.grad  # F32: the gradient itself, as the worker pushes it
        else:
            codec_read.write_params(upd, code, 0, t.encode_grad(code, 0))
        for i in range(t.n_params):
            p[i] -= lr * upd[i]
    with open(out, "wb") as f:
        f.write(p)
    print("ok")
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--model", default="mlp:64-32-10", help="model spec")
    parser.add_argument("--dataset", default="digits", help="dataset name")
    parser.add_argument(
        "--max-iterations",
        dest="steps",
        type=int,
        default=600,
        help="SGD steps per run (default: 600)",
    )
    parser.add_argument("--lr", type=float, default=0.1, help="learning rate")
    parser.add_argument("--batch", type=int, default=16, help="batch size")
    parser.add_argument("--seeds", type=int, default=3, help="runs per row (median)")


def _board_run(tmp: Path, name: str, seed: int, args: argparse.Namespace) -> Path:
    exe = micropython_path()
    if exe is None:
        raise FileNotFoundError("micropython binary missing")
    code, keep, ef = ROWS[name]
    out = tmp / f"{name}-{seed}.bin"
    call = (f"main({args.model!r}, {str(tmp / f'data{seed}.bin')!r}, "
            f"{str(tmp / f'init{seed}.bin')!r}, {str(out)!r}, {code}, {keep!r}, "
            f"{ef}, {args.steps}, {args.lr}, {args.batch}, {seed + 1})")  # fmt: skip
    fw = firmware_dir()
    env = dict(os.environ, MICROPYPATH=f"{fw}:.frozen")
    proc = subprocess.run(
        [exe, "-c", SCRIPT + "\n" + call + "\n"], capture_output=True, text=True,
        timeout=DEADLINE, env=env, cwd=fw,
    )  # fmt: skip
    if proc.returncode != 0 or not out.is_file():
        raise RuntimeError((proc.stderr + proc.stdout).strip()[-400:])
    return out


def measure(args: argparse.Namespace) -> dict[str, Any]:
    from edgeps_worker import datafile

    spec = ModelSpec.parse(args.model)
    ds = load_dataset(args.dataset, seed=0)
    ref = get_backend("numpy")
    acc: dict[str, list[float]] = {name: [] for name in ROWS}
    loss: dict[str, list[float]] = {name: [] for name in ROWS}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for seed in range(args.seeds):
            X, y = ds.shard(partition_iid(len(ds.y_train), 1, seed=seed)[0])
            datafile.write_file(str(tmp / f"data{seed}.bin"), X.tolist(), y.tolist())
            (tmp / f"init{seed}.bin").write_bytes(spec.init_params(seed).tobytes())
            for name in ROWS:
                p = np.frombuffer(_board_run(tmp, name, seed, args).read_bytes(), "<f4")
                pred = ref.predict(spec, p, ds.X_test)
                acc[name].append(float(np.mean(pred == ds.y_test)))
                loss[name].append(float(ref.loss_and_grad(spec, p, ds.X_test,
                                                          ds.y_test)[0]))  # fmt: skip
    base = statistics.median(acc["f32"])
    rows = [
        {
            "codec": name,
            "accuracy": round(statistics.median(acc[name]), 4),
            "vs_f32_points": round(100 * (statistics.median(acc[name]) - base), 2),
            "test_loss": round(statistics.median(loss[name]), 6),
            "runs": [round(a, 4) for a in acc[name]],
        }
        for name in ROWS
    ]
    return {
        "benchmark": "fw-feedback",
        "model": args.model,
        "dataset": args.dataset,
        "steps": args.steps,
        "lr": args.lr,
        "batch": args.batch,
        "seeds": args.seeds,
        "rows": rows,
    }


def run(args: argparse.Namespace) -> int:
    if args.steps < 1 or args.seeds < 1 or args.batch < 1 or not args.lr > 0:
        raise SystemExit("edgeps bench fw-feedback: steps, seeds, batch, lr > 0")
    try:
        report = measure(args)
    except (OSError, RuntimeError, ValueError, subprocess.TimeoutExpired) as exc:
        print(f"edgeps bench fw-feedback: failed: {exc}")
        return 1
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"{report['model']} on {report['dataset']}, one board, {report['steps']} SGD"
        f" steps (lr {report['lr']}, batch {report['batch']}), median of"
        f" {report['seeds']}"
    )
    print(f"{'codec':<10} {'accuracy':>9} {'vs f32':>8} {'test loss':>10}")
    for r in report["rows"]:
        print(
            f"{r['codec']:<10} {r['accuracy']:>9.4f} {r['vs_f32_points']:>+7.2f}p"
            f" {r['test_loss']:>10.6f}"
        )
    return 0
