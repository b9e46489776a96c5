"""Central LeNet-5 on the paper bench's data: test accuracy every 50 steps per recipe.

Which targets `edgeps bench paper` can ask for, and which training recipe
reaches them in the fewest steps: the dataset's model trained in one process
with the C kernels (seed 0), evaluated on the first 1,000 test samples.
A recipe is OPTIMIZER:LR:BATCH (sgd, momentum with 0.9, adam).

    python tools/paper_central.py mnist 1500 sgd:0.05:256 momentum:0.005:256
"""

from __future__ import annotations

import sys
import time

import numpy as np
from edgeps.kernels import ModelSpec, get_backend
from edgeps.workloads.datasets import load_dataset


def curve(name: str, steps: int, recipe: str) -> list[tuple[int, float]]:
    """(step, test accuracy) every 50 steps of one recipe."""
    ds = load_dataset(name, 0)
    spec, K = ModelSpec.parse(ds.model_spec), get_backend("c")
    opt, lr_s, batch_s = recipe.split(":")
    lr, batch = float(lr_s), int(batch_s)
    p = spec.init_params(0)
    g, v, m2 = np.empty_like(p), np.zeros_like(p), np.zeros_like(p)
    rng = np.random.default_rng(0)
    order, pos, out = rng.permutation(len(ds.y_train)), 0, []
    for s in range(1, steps + 1):
        if pos + batch > len(order):
            order, pos = rng.permutation(len(ds.y_train)), 0
        b = order[pos : pos + batch]
        pos += batch
        K.loss_and_grad(spec, p, ds.X_train[b], ds.y_train[b], g)
        if opt == "sgd":
            p -= lr * g
        elif opt == "momentum":
            K.momentum_step(p, g, v, lr, 0.9)
        else:
            K.adam_step(p, g, v, m2, s, lr)
        if s % 50 == 0:
            acc = K.accuracy(spec, p, ds.X_test[:1000], ds.y_test[:1000])
            out.append((s, float(acc)))
    return out


def main() -> None:
    name, steps = sys.argv[1], int(sys.argv[2])
    for recipe in sys.argv[3:]:
        t0 = time.time()
        points = " ".join(f"{s}:{a:.3f}" for s, a in curve(name, steps, recipe))
        print(f"{recipe} {time.time() - t0:.0f}s {points}", flush=True)


if __name__ == "__main__":
    main()
