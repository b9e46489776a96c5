"""The conv matrix preset: each conv dataset's job, sized so the matrix stays cheap.

Conv training in the simulator is real compute (a LeNet-5 step at batch 32
costs milliseconds), so each conv dataset carries its own target, run length,
evaluation interval and optimizer, chosen from 8-worker ASP runs
(host/BENCHMARKS.md, "DSP on conv jobs"): ASP reaches the target at 8
workers, and a run costs seconds of CPU, not minutes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ConvJob:
    """One conv dataset's job in the matrix (its default model; virtual seconds)."""

    partition: str
    target: float
    max_time: float  # at 8 workers; see `max_time_at`
    eval_interval: float
    lr: float
    optimizer: str = "adam"
    batch: int = 32

    def max_time_at(self, workers: int) -> float:
        """Run length for ``workers``: more workers push more updates per
        virtual second, so the run shrinks as 1.5 sqrt(8 / N) (never longer
        than at 8), which keeps a cell's CPU about flat across sizes."""
        return self.max_time * min(1.0, 1.5 * math.sqrt(8 / max(1, workers)))

    def fields(self, workers: int) -> dict[str, Any]:
        """The SimConfig fields this job sets in a cell of ``workers``."""
        return {
            "target_accuracy": self.target,
            "max_time": self.max_time_at(workers),
            "eval_interval": self.eval_interval,
            "batch_size": self.batch,
            "optimizer": self.optimizer,
            "lr": self.lr,
        }


# dataset -> its job; the model is the dataset's default (conv1d, LeNet-5)
JOBS: dict[str, ConvJob] = {
    "mnist1d": ConvJob("iid", 0.65, 200.0, 5.0, 0.003),
    # 40 training rows: each board draws 8 or more with a near-even class mix
    # (shards overlap), so that 64 boards have data
    "basicmotions": ConvJob("labelmix:100", 0.8, 60.0, 2.0, 0.003),
    "mnist": ConvJob("iid", 0.75, 30.0, 2.0, 0.001),
}

DATASETS = tuple(JOBS)
SIZES = (8, 32, 64)
SCENARIOS = ("disturbed", "stragglers", "churn", "mixed")
# the per-gradient rows DSP is judged against, and four readings of DSP: the
# default, its stale steps damped, and rounds from 8 boards of close speed
POLICIES = (
    "bsp",
    "asp",
    "ssp:2",
    "ssp:4",
    "dsp",
    "dsp:damp=1",
    "dsp:rounds=8",
    "dsp:rounds=8,damp=1",
)
