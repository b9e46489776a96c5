"""The policy matrix: every policy in every scenario, dataset, size and balancing.

A cell is (dataset, workers, scenario, balancing); in each cell every row (a
policy, with ``/hH`` its boards take H local steps per push: "fedavg/h8")
runs over the same seeds and is summarised by its median time to the dataset's
target accuracy and median final accuracy. Runs go to a process pool (one per
core by default), so the whole matrix takes minutes on a small machine.
``edgeps bench policies --matrix`` prints it, with the best policy per cell
marked, and checks the goals of balancing and of DSP against it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import statistics
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from edgeps.lab.matrix import conv
from edgeps.sim.simulator import simulate
from edgeps.sim.types import SimConfig

SCENARIOS = (
    "homogeneous",
    "stragglers",
    "interference",
    "disturbed",
    "mixed",
    "churn",
    "lossy",
)
# dataset -> (partition, target accuracy): the synthetic set the defaults were
# tuned on, and a real one split non-IID that they were not
DATASETS: dict[str, tuple[str, float]] = {
    "sensors": ("iid", 0.91),
    "digits": ("dirichlet:0.3", 0.9),
}
# digits has 1,438 training rows: a per-class Dirichlet split cannot give 64
# workers 8 rows each, so past 16 workers each draws its own Dirichlet mix
LARGE = 16
LARGE_PARTITION = {"dirichlet:0.3": "labelmix:0.3"}
SIZES = (8, 64)
POLICIES = (
    "bsp",
    "asp",
    "ssp:3",
    "dsp",
    "kofn:auto",
    "dssp",
    "fedavg",
    "fedbuff:k=8",
    "fedasync:a=0.6",
)
LOCAL_STEPS = (1,)  # the local-steps dimension: each policy once per H
MAX_TIME = 30.0  # virtual seconds per run


@dataclass(frozen=True, order=True)
class Cell:
    dataset: str
    workers: int
    scenario: str
    balance: bool

    def label(self) -> str:
        bal = "on" if self.balance else "off"
        return f"{self.dataset}/{self.workers}/{self.scenario}/bal-{bal}"


def row_name(policy: str, local_steps: int) -> str:
    """A matrix row: the policy, with "/hH" when boards take H > 1 local steps."""
    return policy if local_steps == 1 else f"{policy}/h{local_steps}"


def split_row(row: str) -> tuple[str, int]:
    """(policy, local steps) of a row name."""
    policy, slash, h = row.rpartition("/h")
    if not slash:
        return row, 1
    if not h.isdigit() or int(h) < 1:
        raise ValueError(f"bad row {row!r}: expected POLICY or POLICY/hH, H >= 1")
    return policy, int(h)


@dataclass
class Entry:
    """One policy in one cell: medians over seeds (unreached runs count as inf)."""

    policy: str
    times: list[float | None]
    accuracies: list[float]
    staleness: list[int]
    bytes_up: list[float] = field(default_factory=list)  # per board, to the target
    joules: list[float] = field(default_factory=list)  # per board, to the target

    @property
    def time(self) -> float | None:
        med = statistics.median(math.inf if t is None else t for t in self.times)
        return None if math.isinf(med) else float(med)

    @property
    def accuracy(self) -> float:
        return float(statistics.median(self.accuracies))

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "time_to_target": self.time,
            "final_accuracy": self.accuracy,
            "reached": sum(t is not None for t in self.times),
            "seeds": len(self.times),
            "max_staleness": statistics.median(self.staleness),
            "bytes_up_per_board": _median(self.bytes_up),
            "joules_per_board": _median(self.joules),
            "runs": {"time_to_target": self.times, "final_accuracy": self.accuracies},
        }


@dataclass
class CellResult:
    cell: Cell
    entries: dict[str, Entry] = field(default_factory=dict)

    def best(self) -> str | None:
        """The policy that reached the target soonest (then: higher accuracy)."""
        reached = [e for e in self.entries.values() if e.time is not None]
        if not reached:
            return None
        return min(reached, key=lambda e: (e.time, -e.accuracy)).policy

    def to_dict(self) -> dict[str, Any]:
        return {
            "dataset": self.cell.dataset,
            "workers": self.cell.workers,
            "scenario": self.cell.scenario,
            "balance": self.cell.balance,
            "best": self.best(),
            "policies": [e.to_dict() for e in self.entries.values()],
        }


def _median(xs: list[float]) -> float | None:
    return float(statistics.median(xs)) if xs else None


def cells(
    datasets: Iterable[str] = tuple(DATASETS),
    sizes: Iterable[int] = SIZES,
    scenarios: Iterable[str] = SCENARIOS,
    balance: Iterable[bool] = (False, True),
) -> list[Cell]:
    out = [
        Cell(d, n, s, b)
        for d in datasets
        for n in sizes
        for s in scenarios
        for b in balance
    ]
    known = [*DATASETS, *conv.JOBS]
    for c in out:
        if c.dataset not in known:
            raise ValueError(f"unknown dataset {c.dataset!r}; known: {known}")
    return out


def config(
    cell: Cell,
    policy: str,
    seed: int,
    max_time: float | None,
    balance_eager: bool | None = None,
) -> SimConfig:
    """One run of a cell; ``max_time`` None: the dataset's own (MAX_TIME for
    the tabular ones). A conv dataset brings its job (``conv.JOBS``)."""
    policy, local_steps = split_row(policy)
    job = conv.JOBS.get(cell.dataset)
    fields: dict[str, Any]
    if job is not None:
        partition = job.partition
        fields = job.fields(cell.workers)
        if max_time is not None:
            fields["max_time"] = max_time
    else:
        partition, target = DATASETS[cell.dataset]
        if cell.workers > LARGE:
            partition = LARGE_PARTITION.get(partition, partition)
        fields = {
            "target_accuracy": target,
            "max_time": MAX_TIME if max_time is None else max_time,
        }
    return SimConfig(
        policy=policy,
        scenario=cell.scenario,
        n_workers=cell.workers,
        seed=seed,
        dataset=cell.dataset,
        partition=partition,
        balance=cell.balance,
        balance_eager=balance_eager,  # None: the mode by policy
        local_steps=local_steps,
        **fields,
    )


Outcome = tuple[float | None, float, int, float, float]


def _one(cfg: SimConfig) -> Outcome:
    r = simulate(cfg)
    usage = (r.bytes_up_per_board, r.joules_per_board)
    return r.time_to_target, r.final_accuracy, r.max_staleness, *usage


def run_matrix(
    grid: list[Cell],
    policies: Iterable[str] = POLICIES,
    *,
    seeds: int = 3,
    first_seed: int = 0,
    max_time: float | None = MAX_TIME,
    jobs: int | None = None,
    balance_eager: bool | None = None,
    local_steps: Iterable[int] = LOCAL_STEPS,
    overrides: dict[str, Any] | None = None,
) -> list[CellResult]:
    """Every row (policy x local steps) in every cell over ``seeds`` seeds, on
    ``jobs`` processes. ``overrides``: SimConfig fields set in every run (a
    target, the host's costs); ``max_time`` None: each dataset's own."""
    policies = [row_name(p, h) for p in policies for h in local_steps]
    if seeds < 1 or not policies or not grid:
        raise ValueError("need at least one seed, one policy and one cell")
    configs = [
        (
            cell,
            pol,
            dataclasses.replace(
                config(cell, pol, first_seed + s, max_time, balance_eager),
                **(overrides or {}),
            ),
        )
        for cell in grid
        for pol in policies
        for s in range(seeds)
    ]
    jobs = jobs or min(2, os.cpu_count() or 1)
    if jobs <= 1:
        outcomes = [_one(c) for _, _, c in configs]
    else:
        # the longest runs (most workers) first, so the pool ends together
        order = sorted(range(len(configs)), key=lambda i: -configs[i][0].workers)
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_one, [configs[i][2] for i in order], chunksize=1))
        outcomes = [None] * len(configs)  # type: ignore[list-item]
        for i, out in zip(order, done, strict=True):
            outcomes[i] = out
    results = {cell: CellResult(cell) for cell in grid}
    for (cell, pol, _), (t, acc, stale, up, j) in zip(configs, outcomes, strict=True):
        entry = results[cell].entries.setdefault(pol, Entry(pol, [], [], []))
        entry.times.append(t)
        entry.accuracies.append(acc)
        entry.staleness.append(stale)
        entry.bytes_up.append(up)
        entry.joules.append(j)
    return [results[c] for c in grid]
