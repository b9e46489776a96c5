"""The jobs tools/peers/compare.py runs: each one's data, model, lr, target and rows.

Pure settings, no processes: ``--job``'s defaults, each overridden by its own
flag, and the extra `edgeps serve` / `edgeps emulate` flags that make the
edgeps side run the same job as the exported one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["JOBS", "default_rows", "edgeps_flags", "job_settings", "rows_of", "split"]


def split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


# a job: dataset, model (None: the dataset's), serve's lr (None: the policy
# matrix's), target (None: the matrix's), base seconds per emulated step (None:
# the scenario's), each overridden by its flag; "per_step": edgeps'
# per-gradient row ("dsp" at lr 0.05 diverges on LeNet-5: host/BENCHMARKS.md);
# "flower_h1": Flower at H = 1 too by default
JOBS: dict[str, dict[str, Any]] = {
    "sensors": {"dataset": "sensors", "model": None, "lr": None, "target": None,
                "compute_time": None, "per_step": "dsp", "flower_h1": True},
    "lenet5": {"dataset": "mnist", "model": "lenet5", "lr": 0.05, "target": 0.95,
               "compute_time": 0.01, "per_step": "dsp@lr=0.02", "flower_h1": False},
}  # fmt: skip


def default_rows(args: Any) -> str:
    h, per_step = args.local_steps, JOBS[args.job]["per_step"]
    # fedavg:agg=mean: McMahan's mean, Flower's FedAvg (edgeps' default
    # fedavg combines the deltas by a trimmed mean)
    return f"fedavg:agg=mean/h{h},fedbuff:k=4/h{h},{per_step}"


def rows_of(args: Any) -> list[str]:
    """edgeps' rows: ``--rows``, else the job's defaults."""
    return split(args.rows or default_rows(args))


def job_settings(args: Any) -> dict[str, Any]:
    """The job's settings: ``--job``'s, each overridden by its own flag."""
    if args.job not in JOBS:
        raise ValueError(f"unknown --job {args.job!r}; known: {', '.join(JOBS)}")
    out = dict(JOBS[args.job])
    for key in ("dataset", "model", "lr", "compute_time"):
        if getattr(args, key, None) is not None:
            out[key] = getattr(args, key)
    if args.target_accuracy is not None:
        out["target"] = args.target_accuracy
    return out


def edgeps_flags(job: dict[str, Any]) -> tuple[str, str]:
    """Extra `edgeps serve` and `edgeps emulate` flags for a job that is not
    the bench's own (they come last, so they override its defaults)."""
    serve, emulate = [], []
    if job["dataset"] != "sensors":
        serve += ["--dataset", job["dataset"]]
        emulate += ["--dataset", job["dataset"]]
    if job["model"] is not None:
        serve += ["--model", job["model"]]
    if job["lr"] is not None:
        serve += ["--lr", f"{job['lr']:g}"]
    if job["compute_time"] is not None:
        emulate += ["--compute-time", f"{job['compute_time']:g}"]
    return " ".join(serve), " ".join(emulate)
