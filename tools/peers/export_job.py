"""Write one edgeps job as a file a peer framework reads: data, model, weights, times.

Runs in edgeps' own environment. For a dataset, a number of sensors, a
scenario and a seed it takes exactly what `edgeps serve` and `edgeps emulate`
would use for that seed: each sensor's shard (`load_emulated`, the emulator's
IID split), the held-out rows serve evaluates on, the model spec and the
initial weights serve starts from (`ModelSpec.init_params(seed)`), the job's
lr and batch, and each sensor's emulated compute time from the scenario's
profile (with `edgeps emulate --compute-time` where given, scaled for a conv
model as the emulator scales it), with the seeds of its minibatch order and of
its compute draws. The peer (tools/peers/flower/run_flower.py) reads the .npz
this writes with numpy alone (an MLP) or with edgeps' kernels (any other model).

    python tools/peers/export_job.py OUT.npz [--workers 8] [--scenario S] [--seed K]
        [--dataset mnist --model lenet5 --lr 0.05 --compute-time 0.01]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

import numpy as np
from edgeps.core.defaults import JOB
from edgeps.kernels import ModelSpec
from edgeps.lab.matrix import grid as matrix
from edgeps.pyworker.localdata import load_emulated
from edgeps.runtime.model_forms import complete_model
from edgeps.workloads import datasets
from edgeps.workloads.scenarios import make_scenario

DATASET = "sensors"
SCHEME = "iid"  # what `edgeps emulate` splits by default


def shards(
    dataset: str, n_workers: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Each emulated sensor's (X, y), as `edgeps emulate --seed` gives sensor i."""
    out = []
    for i in range(n_workers):
        data, _ = load_emulated(f"{dataset}:{i}/{n_workers}", seed, SCHEME)
        out.append((data.X, data.y))
    return out


def job_spec(dataset: str, model: str | None, seed: int) -> ModelSpec:
    """The model serve trains: ``--model`` completed for the dataset, or its own."""
    ds = datasets.load_dataset(dataset, seed)
    if model is None:
        return ModelSpec.parse(ds.model_spec)
    own = ModelSpec.parse(ds.model_spec)
    full = complete_model(model, own.n_features, max(2, own.n_classes), ds.shape)
    return ModelSpec.parse(full)


def profiles_of(
    scenario: str,
    n_workers: int,
    seed: int,
    spec: ModelSpec,
    compute_time: float | None,
) -> list[Any]:
    """Each sensor's profile as `edgeps emulate` runs it: the scenario's, the
    base time ``compute_time`` where given, scaled for the model's FLOPs."""
    out = []
    for p in make_scenario(scenario, n_workers, seed).profiles.values():
        if compute_time is not None:
            if not compute_time > 0:
                raise ValueError("compute_time must be > 0 seconds")
            p = replace(p, compute_time=compute_time)
        out.append(p.for_model(spec.macs, spec.n_params))
    return out


def job_arrays(
    *,
    dataset: str = DATASET,
    model: str | None = None,
    n_workers: int = 8,
    scenario: str = "homogeneous",
    seed: int = 0,
    local_steps: int = 8,
    target: float | None = None,
    lr: float | None = None,
    compute_time: float | None = None,
) -> dict[str, Any]:
    """Everything a peer needs to run the same job, as named numpy arrays."""
    if local_steps < 1 or n_workers < 1:
        raise ValueError("need local_steps >= 1 and n_workers >= 1")
    if (lr is None or target is None) and dataset not in matrix.DATASETS:
        raise ValueError(f"{dataset}: give the lr and the target accuracy")
    ds = datasets.load_dataset(dataset, seed)
    spec = job_spec(dataset, model, seed)
    profiles = profiles_of(scenario, n_workers, seed, spec, compute_time)
    if lr is None:
        # the lr `edgeps bench policies-broker` gives serve (the matrix's)
        cell = matrix.Cell(dataset, n_workers, scenario, False)
        lr = matrix.config(cell, "fedavg", seed, 60.0).lr
    out: dict[str, Any] = {
        "dataset": np.array(dataset),
        "scenario": np.array(scenario),
        "model": np.array(str(spec)),
        "kind": np.array(spec.kind),
        "sizes": np.array(spec.layer_sizes if spec.kind == "mlp" else (), np.int64),
        "activation": np.array(spec.activation if spec.kind == "mlp" else ""),
        "init": spec.init_params(seed),
        "X_test": ds.X_test,
        "y_test": ds.y_test,
        "lr": np.float64(lr),
        "batch": np.int64(JOB.batch),
        "local_steps": np.int64(local_steps),
        "target": np.float64(matrix.DATASETS[dataset][1] if target is None else target),
        "seed": np.int64(seed),
        "n_workers": np.int64(n_workers),
        # per sensor, in worker-id order (w00, w01, ...)
        "typical": np.array([p.typical_compute for p in profiles]),
        "jitter": np.array([p.compute_jitter for p in profiles]),
        "interference_p": np.array([p.interference_p for p in profiles]),
        "interference_factor": np.array([p.interference_factor for p in profiles]),
        # the emulator seeds sensor i's shuffle with seed + i, its compute draws
        # with [seed, i]
        "shuffle_seed": np.array([seed + i for i in range(n_workers)], np.int64),
    }
    for i, (X, y) in enumerate(shards(dataset, n_workers, seed)):
        out[f"X_{i}"] = X
        out[f"y_{i}"] = y
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="the .npz to write")
    parser.add_argument("--dataset", default=DATASET)
    parser.add_argument("--model", default=None, help="default: the dataset's")
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--compute-time", type=float, default=None, metavar="S")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--scenario", default="homogeneous")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--local-steps", type=int, default=8)
    parser.add_argument("--target-accuracy", type=float, default=None)
    args = parser.parse_args(argv)
    try:
        arrays = job_arrays(
            dataset=args.dataset,
            model=args.model,
            lr=args.lr,
            compute_time=args.compute_time,
            n_workers=args.workers,
            scenario=args.scenario,
            seed=args.seed,
            local_steps=args.local_steps,
            target=args.target_accuracy,
        )
    except ValueError as exc:
        print(f"export_job: {exc}", file=sys.stderr)
        return 2
    np.savez(args.out, **arrays)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
