"""The conv rows of `edgeps bench policies-broker`: a conv matrix cell, time-scaled.

A conv dataset's cell runs the conv matrix's job (``edgeps.lab.matrix.conv.
JOBS``: the dataset's default model, Adam, its lr, batch, target, evaluation
interval and shards) on a real serve and emulate, with every time of the job
divided by the dataset's time scale K: the boards' base iteration (emulate
``--compute-time``, which the model's FLOPs then scale as in the simulator),
the evaluation interval, the run length and the disturbed board's bursts.
The emulator runs each sensor's real conv gradient (milliseconds) and sleeps
the rest of its profile's step, so its wall time follows the profile: an
unscaled MNIST-1D run would last 200 wall seconds. Not scaled: link delays,
jitter and loss, heartbeats and the liveness timeout, and churn's crash and
rejoin times (so churn has no conv rows here). The batch is the job's, capped
at the smallest shard: the simulator charges a step for the rows a board
draws, the emulator for the batch it was asked (BasicMotions' 8-row shards:
3.1x the time), and at the capped batch both draw and charge the same rows
(the simulator's runs are the matrix cell's, bit for bit). The simulator runs
the very same scaled job: `sim_config` is what `edgeps simulate --compare` builds from
`simulate_command`'s flags, and `sim_cell` calls the code that command calls.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from edgeps.lab.matrix import conv
from edgeps.lab.matrix import grid as matrix
from edgeps.lab.matrix.grid import Cell, CellResult, Entry
from edgeps.sim.types import EMULATOR_CPU_US, SimConfig
from edgeps.workloads.bursts import parse_bursts
from edgeps.workloads.scenarios import BASE_COMPUTE, DISTURBED

# dataset -> K: a real 8-worker run of the matrix's length in 25-30 wall s
TIME_SCALE = {"mnist1d": 8.0, "basicmotions": 2.0, "mnist": 1.0}
UNSCALED = ("churn",)  # its crash and rejoin times are fixed seconds


def is_conv(dataset: str) -> bool:
    return dataset in conv.JOBS


def time_scale(dataset: str, given: float | None = None) -> float:
    """K for ``dataset``: ``given`` if set, else the dataset's (1 if not conv)."""
    k = TIME_SCALE.get(dataset, 1.0) if given is None else float(given)
    if not k >= 1.0:
        raise ValueError(f"--time-scale must be >= 1, got {k:g}")
    return k


def scaled_scenario(scenario: str, k: float) -> str:
    """``scenario`` with its clock divided by ``k``: disturbed's burst and period."""
    base, _, params = scenario.partition(":")
    if base in UNSCALED and k != 1.0:
        raise ValueError(
            f"{base} cannot be time-scaled (its crash times are fixed); "
            "use --time-scale 1 or another scenario"
        )
    if base != "disturbed" or k == 1.0:
        return scenario
    p = {**DISTURBED, **parse_bursts(params)}
    p["burst"], p["period"] = p["burst"] / k, p["period"] / k
    text = ",".join(f"{key}={p[key]:g}" for key in ("burst", "period", "share"))
    return f"disturbed:{text},workers={int(p['workers'])}"


def sim_config(cell: Cell, policy: str, seed: int, k: float) -> SimConfig:
    """The matrix cell's run at time scale ``k``, its emulator charged to the host."""
    cfg = matrix.config(cell, policy, seed, None)
    return dataclasses.replace(
        cfg,
        batch_size=min(cfg.batch_size, smallest_shard(cfg)),
        scenario=scaled_scenario(cfg.scenario, k),
        compute_time=BASE_COMPUTE / k,
        eval_interval=cfg.eval_interval / k,
        max_time=cfg.max_time / k,
        emulator_cpu_us=EMULATOR_CPU_US,
    )


def smallest_shard(cfg: SimConfig) -> int:
    """Rows of the smallest board's shard in ``cfg``'s split (seeded as a run)."""
    from edgeps.workloads.datasets import load_dataset, partition

    y = load_dataset(cfg.dataset, cfg.seed).y_train
    return min(len(s) for s in partition(y, cfg.n_workers, cfg.partition, cfg.seed))


def _g(x: float) -> str:
    return format(x, ".6g")


def serve_flags(cfg: SimConfig) -> list[str]:
    """What serve needs to run ``cfg``'s job (the model is the dataset's default)."""
    return [
        "--dataset", cfg.dataset, "--optimizer", cfg.optimizer,
        "--lr", _g(cfg.lr), "--lr-workers", str(cfg.lr_workers),
        "--eval-interval", _g(cfg.eval_interval),
        "--target-accuracy", _g(cfg.target_accuracy),
        "--max-time", _g(cfg.max_time),
    ]  # fmt: skip


def emulate_flags(cfg: SimConfig) -> list[str]:
    """What emulate needs for ``cfg``'s boards: data split, batch, step, scenario."""
    assert cfg.compute_time is not None
    return [
        "--dataset", cfg.dataset, "--partition", cfg.partition,
        "--batch", str(cfg.batch_size), "--compute-time", _g(cfg.compute_time),
        "--scenario", cfg.scenario,
    ]  # fmt: skip


def simulate_command(cfg: SimConfig, policies: list[str], seeds: int) -> list[str]:
    """`edgeps simulate --compare` on ``cfg``'s job: the simulator's first choice."""
    assert cfg.compute_time is not None
    return [
        "edgeps", "simulate", "--compare", ",".join(policies),
        "--dataset", cfg.dataset, "--partition", cfg.partition,
        "--workers", str(cfg.n_workers), "--scenario", cfg.scenario,
        "--seed", str(cfg.seed), "--seeds", str(seeds),
        "--batch", str(cfg.batch_size), "--optimizer", cfg.optimizer,
        "--lr", _g(cfg.lr), "--lr-workers", str(cfg.lr_workers),
        "--target-accuracy", _g(cfg.target_accuracy),
        "--max-time", _g(cfg.max_time), "--eval-interval", _g(cfg.eval_interval),
        "--compute-time", _g(cfg.compute_time), "--emulated",
        *(["--balance"] if cfg.balance else []),
    ]  # fmt: skip


def sim_cell(
    cell: Cell, policies: list[str], seeds: int, first_seed: int, k: float,
    overrides: dict[str, Any] | None = None,
) -> CellResult:  # fmt: skip
    """The simulator's medians for the cell, as `edgeps simulate --compare` has."""
    from edgeps.sim.compare import compare

    base = dataclasses.replace(
        sim_config(cell, policies[0], first_seed, k), **(overrides or {})
    )
    out = CellResult(cell)
    for s in compare(policies, base, seeds, first_seed=first_seed):
        out.entries[s.policy] = Entry(
            s.policy,
            [r.time_to_target for r in s.runs],
            [r.final_accuracy for r in s.runs],
            [r.max_staleness for r in s.runs],
        )
    return out
