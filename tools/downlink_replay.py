"""Replay BSP training in numpy with each release decoded as a worker would hold it.

Usage: python tools/downlink_replay.py [--dataset sensors] [--workers 8]
       [--rounds 150] [--seeds 3] [--lr 0.1] [--json]

Each round the workers compute one gradient each on the parameters the
release decodes to (``edgeps.kernels.params_codec.decoded``: F32, F16 or
I8), and the PS applies the pushes one by one with SGD on its float32 copy,
as `edgeps serve --policy bsp` does. The same seeds draw the same batches for
every code, so the accuracy differences are the downlink code's alone.
Prints the test accuracy at the end and the best over the run per code,
median over seeds, and the largest gap to F32.
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np
from edgeps import kernels
from edgeps.kernels import ModelSpec, params_codec
from edgeps.workloads.datasets import load_dataset, partition

CODES = ("f32", "f16", "int8")


def replay(ds, spec, code: int, workers: int, rounds: int, lr: float, seed: int):
    shards = [ds.shard(ix) for ix in partition(ds.y_train, workers, "iid", seed)]
    rng = np.random.default_rng(seed)
    params = spec.init_params(seed).astype(np.float32)
    curve = []
    for r in range(rounds):
        held = params_codec.decoded(params, code)
        grads = []
        for X, y in shards:
            take = rng.integers(0, len(y), 32)
            _, g = kernels.loss_and_grad(spec, held, X[take], y[take])
            grads.append(g.copy())
        for g in grads:
            params -= np.float32(lr) * g
        if r % 10 == 9 or r == rounds - 1:
            curve.append(kernels.accuracy(spec, params, ds.X_test, ds.y_test))
    return curve[-1], max(curve)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="sensors")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=150)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    ds = load_dataset(a.dataset, 0)
    spec = ModelSpec.parse(ds.model_spec)
    rows = {}
    for name in CODES:
        code = params_codec.parse_code(name)
        runs = [
            replay(ds, spec, code, a.workers, a.rounds, a.lr, s) for s in range(a.seeds)
        ]
        rows[name] = {
            "final": statistics.median(r[0] for r in runs),
            "best": statistics.median(r[1] for r in runs),
            "bytes": params_codec.encoded_len(code, spec.n_params),
            "runs": [[round(x, 4) for x in r] for r in runs],
        }
    if a.json:
        print(json.dumps({"dataset": a.dataset, "model": str(spec), "rows": rows}))
        return
    print(f"{a.dataset} {spec} workers {a.workers} rounds {a.rounds} seeds {a.seeds}")
    print(f"{'code':<6} {'PARAMS B':>9} {'final acc':>9} {'best acc':>9} {'vs f32':>8}")
    for name, row in rows.items():
        gap = row["final"] - rows["f32"]["final"]
        print(
            f"{name:<6} {row['bytes']:>9} {row['final']:>9.4f} {row['best']:>9.4f} "
            f"{gap * 100:>+7.2f}pt"
        )


if __name__ == "__main__":
    main()
