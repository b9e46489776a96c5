"""The paper bench's plan: targets, the disturbance, the simulator's calibration.

Pure arithmetic on settings and serve's metrics snapshots, so it is
unit-tested without a broker: which targets a dataset gets and where a run
stops, the ``disturbed`` scenario's text from ``--disturb``, the BSP/DSP ratio
the disturbance's schedule alone allows, the simulator's base compute time
from a step measured in a real run, and how long the simulator may run.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from edgeps.core.defaults import JOB, worker_step_scale
from edgeps.workloads.scenarios import BASE_BATCH, DISTURBED, FIXED_FRACTION

SIM_SLACK = 1.5  # the simulator runs at most this times the real run's length


@dataclass(frozen=True)
class Recipe:
    """The step, time limit and MNIST targets every row of one worker count runs with.

    One recipe per N for all rows (a fair comparison), chosen from simulated
    and real runs (host/BENCHMARKS.md, "At 8 and 32 workers"). ``lr`` is
    what serve is given: past 16 live workers serve itself steps each push
    by ``lr x 16 / N`` (``--lr-workers``), so ``step_lr`` is what one push
    moves the model by. ``targets`` replace MNIST's (a run stops at the
    highest): N workers share the box's cores, so a gradient costs the same
    and a push moves the model less; empty: the dataset's own.
    """

    lr: float
    max_time: float  # s a run may take to reach the stop target
    targets: tuple[float, ...] = ()


# measured per worker count; other counts take the nearest smaller one's,
# its lr scaled by (its N) / N: async pushes land about N versions stale
RECIPES = {
    3: Recipe(0.05, 40.0),
    8: Recipe(0.02, 75.0, (0.9, 0.95)),
    32: Recipe(0.01, 120.0, (0.8, 0.9)),
}


def recipe_for(n: int, lr: float | None = None,
               max_time: float | None = None) -> Recipe:  # fmt: skip
    """The recipe at ``n`` workers, ``lr`` and ``max_time`` overriding it.

    ValueError for fewer than 2 workers.
    """
    if n < 2:
        raise ValueError(f"--workers must be >= 2, got {n}")
    key = max((k for k in RECIPES if k <= n), default=min(RECIPES))
    base = RECIPES[key]
    scaled = base.lr * key / n if n > key else base.lr
    return Recipe(scaled if lr is None else lr,
                  base.max_time if max_time is None else max_time,
                  base.targets)  # fmt: skip


def targets_at(recipe: Recipe, dataset: str, targets: list[float], stop: float,
               given: bool) -> tuple[list[float], float]:  # fmt: skip
    """(targets, stop) at a worker count: the recipe's on MNIST unless
    ``--targets`` or ``--stop-at`` were ``given``; else those passed in."""
    if given or dataset != "mnist" or not recipe.targets:
        return targets, stop
    return sorted(recipe.targets), max(recipe.targets)


def step_lr(lr: float, n: int) -> float:
    """What one push steps the model by at ``n`` live workers: serve's default
    ``--lr-workers`` scaling, which the bench keeps."""
    return lr * worker_step_scale(JOB.lr_workers, n)


@dataclass(frozen=True)
class DatasetPlan:
    """Targets (test accuracies) for a dataset and the one a run stops at.

    ``stop`` is the highest target central training of the model reaches on
    the bench's data (host/BENCHMARKS.md, "The paper's experiment"): a run
    goes on to ``--max-time`` only when it misses it.
    """

    targets: tuple[float, ...]
    stop: float
    eval_interval: float  # s between serve's evaluations of its test split
    startup: float = 60.0  # s a run may take past --max-time (loading the data)


PLANS = {
    "mnist": DatasetPlan((0.95, 0.97), 0.95, 1.0),
    # 10,000 test images: an evaluation costs 10x MNIST's 1,000
    # every process reads 60,000 images (14 s at load 18): more time to start
    "fashion-mnist": DatasetPlan((0.8, 0.85), 0.85, 3.0, 180.0),
}


def plan_for(dataset: str) -> DatasetPlan:
    """The dataset's plan; ValueError names the known ones."""
    if dataset not in PLANS:
        raise ValueError(f"unknown --dataset {dataset!r}; known: {', '.join(PLANS)}")
    return PLANS[dataset]


def stop_target(targets: list[float], stop: float | None, reachable: float) -> float:
    """Where a run stops: ``stop`` if given, else the highest target the
    dataset reaches centrally (``reachable``) or the highest target if lower."""
    if stop is not None:
        return stop
    return min(max(targets), reachable)


def parse_disturb(text: str | None) -> dict[str, float]:
    """``burst=4,period=6,share=0.9`` as numbers over the scenario's defaults.

    Raises ValueError for an unknown key, a bad number or a share outside
    (0, 1], a burst outside (0, period].
    """
    p = {k: v for k, v in DISTURBED.items() if k != "workers"}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in p:
            raise ValueError(
                f"--disturb takes burst=S,period=S,share=F; got {item.strip()!r}"
            )
        try:
            p[key] = float(value)
        except ValueError:
            raise ValueError(f"--disturb {key}: not a number: {value!r}") from None
    if not all(math.isfinite(v) for v in p.values()):
        raise ValueError("--disturb values must be finite")
    if not 0 < p["share"] <= 1:
        raise ValueError(f"--disturb share must be in (0, 1], got {p['share']:g}")
    if not 0 < p["burst"] <= p["period"]:
        raise ValueError("--disturb needs 0 < burst <= period")
    return p


def scenario_text(d: dict[str, float]) -> str:
    """The ``disturbed`` scenario with these burst, period and share."""
    return f"disturbed:burst={d['burst']:g},period={d['period']:g},share={d['share']:g}"


def describe(d: dict[str, float]) -> str:
    return f"burst {d['burst']:g} s every {d['period']:g} s, share {d['share']:g}"


def schedule_bound(d: dict[str, float]) -> float:
    """The best BSP/DSP time ratio the schedule alone allows.

    BSP moves at the disturbed worker's average pace: it keeps ``1 - share``
    of its core for ``burst / period`` of the time, so an iteration takes
    ``1 / (1 - share * burst / period)`` of an undisturbed one on average;
    DSP at best moves at the undisturbed pace (ratio 1). Infinite when the
    competitor takes the whole core all the time.
    """
    lost = d["share"] * d["burst"] / d["period"]
    return math.inf if lost >= 1 else 1.0 / (1.0 - lost)


def update_bound(d: dict[str, float], n: int) -> float:
    """The best BSP/DSP time ratio when a run's time is set by its updates.

    The disturbed worker keeps ``f = 1 - share * burst / period`` of its pace.
    BSP applies N updates a round at that pace (``N f`` worker-iterations of
    updates per undisturbed iteration); no policy applies more than every
    worker's own pace gives (``N - 1 + f``). If DSP's updates train no better
    than BSP's (staler ones train worse), BSP/DSP is at most
    ``(N - 1 + f) / (N f)``, below ``schedule_bound``, which lets DSP move at
    the undisturbed pace with all N workers' updates.
    """
    if n < 1:
        raise ValueError(f"need at least one worker, got {n}")
    f = 1.0 - d["share"] * d["burst"] / d["period"]
    return math.inf if f <= 0 else (n - 1 + f) / (n * f)


def base_compute(step_s: float, batch: int) -> float:
    """The simulator profile's ``compute_time`` whose iteration at ``batch``
    takes ``step_s`` (it scales the time at BASE_BATCH with a fixed tenth)."""
    return step_s / (FIXED_FRACTION + (1.0 - FIXED_FRACTION) * batch / BASE_BATCH)


def measured_step(snaps: list[dict[str, Any]], disturbed: str) -> float | None:
    """The median of the undisturbed workers' mean compute time (s) at the
    last snapshot that has one: a real step, with the box's contention in it."""
    for s in reversed(snaps):
        vals = []
        for wid, w in (s.get("workers") or {}).items():
            if wid == disturbed or not isinstance(w, dict):
                continue
            v = w.get("compute_s")
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if math.isfinite(v) and v > 0:
                vals.append(float(v))
        if vals:
            return statistics.median(vals)
    return None


def sim_bound(real_end: float | None, max_time: float, slack: float = 1.5) -> float:
    """Virtual seconds the simulator may run beside a real run that ended at
    ``real_end`` s (None: unknown): ``slack`` times it, never past ``max_time``."""
    if real_end is None or not real_end > 0:
        return max_time
    return min(max_time, slack * real_end)


def sim_ratio(sim: float | None, real: float | None) -> float | None:
    """sim / real time to a target; None unless both reached it."""
    if sim is None or real is None or real <= 0:
        return None
    return sim / real


def sim_fits(elapsed: float, budget: float, runs_left: int, run_s: float,
             sim_s: float) -> bool:  # fmt: skip
    """Whether one more simulation (about ``sim_s``) still leaves time for the
    ``runs_left`` real runs (about ``run_s`` each) within ``budget`` seconds of
    bench wall time; always with ``budget`` 0 (no limit). The real runs come
    first: they are the table."""
    if budget <= 0:
        return True
    return elapsed + sim_s + runs_left * run_s <= budget
