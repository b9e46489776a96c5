"""The policy matrix: every policy in every scenario, dataset, size and balancing.

A cell is (dataset, workers, scenario, balancing); in each cell every policy
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

from edgeps.sim.simulator import simulate
from edgeps.sim.types import SimConfig

SCENARIOS = ("homogeneous", "stragglers", "interference", "mixed", "churn", "lossy")
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
POLICIES = ("bsp", "asp", "ssp:3", "dsp", "kofn:auto", "dssp")
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


@dataclass
class Entry:
    """One policy in one cell: medians over seeds (unreached runs count as inf)."""

    policy: str
    times: list[float | None]
    accuracies: list[float]
    staleness: list[int]

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
    for c in out:
        if c.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {c.dataset!r}; known: {list(DATASETS)}")
    return out


def config(
    cell: Cell,
    policy: str,
    seed: int,
    max_time: float,
    balance_eager: bool | None = None,
) -> SimConfig:
    partition, target = DATASETS[cell.dataset]
    if cell.workers > LARGE:
        partition = LARGE_PARTITION.get(partition, partition)
    return SimConfig(
        policy=policy,
        scenario=cell.scenario,
        n_workers=cell.workers,
        seed=seed,
        dataset=cell.dataset,
        partition=partition,
        balance=cell.balance,
        balance_eager=balance_eager,  # None: the mode by policy
        target_accuracy=target,
        max_time=max_time,
    )


def _one(cfg: SimConfig) -> tuple[float | None, float, int]:
    r = simulate(cfg)
    return r.time_to_target, r.final_accuracy, r.max_staleness


def run_matrix(
    grid: list[Cell],
    policies: Iterable[str] = POLICIES,
    *,
    seeds: int = 3,
    first_seed: int = 0,
    max_time: float = MAX_TIME,
    jobs: int | None = None,
    balance_eager: bool | None = None,
    overrides: dict[str, Any] | None = None,
) -> list[CellResult]:
    """Every policy in every cell over ``seeds`` seeds, on ``jobs`` processes.

    ``overrides``: SimConfig fields set in every run (a target, the host's costs).
    """
    policies = list(policies)
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
    for (cell, pol, _), (t, acc, stale) in zip(configs, outcomes, strict=True):
        entry = results[cell].entries.setdefault(pol, Entry(pol, [], [], []))
        entry.times.append(t)
        entry.accuracies.append(acc)
        entry.staleness.append(stale)
    return [results[c] for c in grid]
