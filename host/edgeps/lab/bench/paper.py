"""`edgeps bench paper`: the DSP paper's experiment on real processes, one command.

LeNet-5 on MNIST (the bundled 4,000/1,000 digits; ``--dataset
fashion-mnist`` where installed), N CPython ``edgeps worker`` processes, a
real ``edgeps serve`` and a private mosquitto on 127.0.0.1, a job of their
own per run. One worker is disturbed by a real CPU competitor
(``edgeps.lab.disturb``: burners pinned to its core, in bursts): the one the
``disturbed`` scenario picks for the seed, on the same schedule (burst 2 s
every 6 s taking 0.8 of the core, phase from the seed), its clock started
when the workers are. A passive broker client times each run from the first
HELLO; serve's metrics snapshots give accuracy over time (time to each
target), the idle share of an iteration and each worker's staleness; serve's
JSON the final accuracy and maximum staleness; the client the bytes. Beside
every real run the simulator runs the same model, data, workers, seed and
``disturbed`` scenario with its compute time calibrated from a measured real
step (see ``calibrated_step``). Rows are medians of ``--seeds``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edgeps.lab.bench.paper_plan import (
    SIM_SLACK,
    parse_disturb,
    plan_for,
    recipe_for,
    scenario_text,
    schedule_bound,
    sim_fits,
    stop_target,
    targets_at,
    update_bound,
)  # fmt: skip
from edgeps.lab.bench.paper_run import disturbed_worker, run_once
from edgeps.lab.bench.paper_sim import simulate_run, step_in_process
from edgeps.lab.bench.paper_stale import stale_lines, stale_summary
from edgeps.lab.bench.paper_start import start_line
from edgeps.lab.bench.paper_table import (
    PaperRun,
    build_rows,
    cpu_lines,
    failure_lines,
    goal_lines,
    header,
    ratios,
    table,
)  # fmt: skip

POLICIES = ("bsp", "ssp:1", "ssp:2", "ssp:4", "ssp:8", "dsp", "dsp:w=4,grace=1", "asp")
QUICK_POLICIES = ("bsp", "ssp:2", "dsp", "asp")
__all__ = ["POLICIES", "QUICK_POLICIES", "configure", "disturbed_worker", "run",
           "settings"]  # fmt: skip


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="mnist", help="mnist or fashion-mnist")
    parser.add_argument("--model", default="lenet5")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--workers", default="3", help="comma-separated, e.g. 3,8,32")
    parser.add_argument("--seeds", type=int, default=3, help="runs per row (median)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument(
        "--targets",
        default=None,
        help="test accuracies (default: the dataset's, "
        "mnist 0.95,0.97, fashion-mnist 0.8,0.85)",
    )
    parser.add_argument(
        "--stop-at",
        type=float,
        default=None,
        help="a run stops at this accuracy (default: the highest "
        "target central training reaches: mnist 0.95)",
    )
    parser.add_argument("--disturb", default="",
                        help="the competitor: burst=S,period=S,share=F "
                        "(default burst=2,period=6,share=0.8)")  # fmt: skip
    parser.add_argument("--optimizer", default="sgd", help="sgd, momentum, adam")
    parser.add_argument("--lr", type=float, default=None,
                        help="serve's lr (default: the recipe for the worker "
                        "count: 3 -> 0.05, 8 -> 0.02, 32 -> 0.01)")  # fmt: skip
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument(
        "--eval-interval",
        type=float,
        default=None,
        help="s (default: mnist 1, fashion-mnist 3)",
    )
    parser.add_argument("--max-time", type=float, default=None,
                        help="s per run (default: the recipe for the worker "
                        "count: 3 -> 40, 8 -> 60, 32 -> 120)")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="3 workers, bsp/ssp:2/dsp/asp, 1 seed, "
                        "targets 0.8,0.85")  # fmt: skip
    parser.add_argument("--no-sim", action="store_true", help="skip the simulator")
    parser.add_argument(
        "--sim-seeds",
        type=int,
        default=1,
        help="seeds the simulator runs per row (from the first)",
    )
    parser.add_argument("--budget", type=float, default=840.0,
                        help="s of bench wall time: a simulation that would leave "
                        "too little for the remaining real runs is skipped "
                        "(0: no limit)")  # fmt: skip
    parser.add_argument("--plot", default=None, help="draw the runs: .png, .svg")
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def _split(text: str) -> list[str]:
    return [x.strip() for x in str(text).split(",") if x.strip()]


def settings(args: Any) -> dict[str, Any]:
    """The run's settings, ``--quick`` and the dataset's plan applied."""
    from edgeps.sim.compare import split_policies

    plan = plan_for(getattr(args, "dataset", "mnist"))
    targets = getattr(args, "targets", None)
    s: dict[str, Any] = {
        "policies": split_policies(args.policies),
        "workers": [int(n) for n in _split(args.workers)],
        "seeds": args.seeds,
        "targets": sorted(float(t) for t in _split(targets))
        if targets
        else list(plan.targets),
        "disturb": parse_disturb(getattr(args, "disturb", "")),
        "eval_interval": getattr(args, "eval_interval", None) or plan.eval_interval,
    }
    if args.quick:
        s.update(policies=list(QUICK_POLICIES), workers=[3], seeds=1,
                 targets=[0.8, 0.85])  # fmt: skip
    s["startup"] = plan.startup
    s["stop"] = stop_target(s["targets"], getattr(args, "stop_at", None), plan.stop)
    s["scenario"] = scenario_text(s["disturb"])
    return s


def _check(args: Any, s: dict[str, Any]) -> None:
    from edgeps.policy import parse_policy

    for p in s["policies"]:
        parse_policy(p)
    if not s["policies"] or not s["workers"] or not s["targets"]:
        raise ValueError("need at least one policy, worker count and target")
    max_time = getattr(args, "max_time", None)
    if min(s["workers"]) < 2 or s["seeds"] < 1 or (max_time is not None
                                                   and max_time <= 0):  # fmt: skip
        raise ValueError("--workers must be >= 2, --seeds >= 1, --max-time > 0")
    if not all(0 < t <= 1 for t in [*s["targets"], s["stop"]]):
        raise ValueError("--targets and --stop-at are accuracies in (0, 1]")
    if s["eval_interval"] <= 0 or args.sim_seeds < 0:
        raise ValueError("--eval-interval must be > 0, --sim-seeds >= 0")
    from edgeps.workloads.datasets import load_dataset

    # every worker loads it: a missing extra (mnist needs edgeps[datasets])
    # is said once, here, not as N workers dying in every run
    load_dataset(args.dataset, 0)


def measure(args: Any, s: dict[str, Any], progress: Any = None) -> dict[str, Any]:
    """Every run on one private mosquitto: per worker count, runs and rows.

    The simulator runs beside the first ``--sim-seeds`` seeds of each row,
    its step the one its real run measured (the undisturbed workers' median
    compute time); else the first measured at that worker count; else one
    timed in this process.
    """
    from edgeps.transport.broker import start_mosquitto

    out: dict[str, Any] = {}
    k, started = 0, time.monotonic()
    total = len(s["workers"]) * s["seeds"] * len(s["policies"])
    real_s: list[float] = []  # wall s of each real run
    sim_s: list[float] = []  # wall s of each simulation
    with tempfile.TemporaryDirectory(prefix="edgeps-paper-") as tmp, \
            start_mosquitto() as b:  # fmt: skip
        for n in s["workers"]:
            step: float | None = None
            source = "off" if args.no_sim else ""
            runs = []
            recipe = recipe_for(n, args.lr, args.max_time)
            a = argparse.Namespace(**{**vars(args), "lr": recipe.lr,
                                      "max_time": recipe.max_time})  # fmt: skip
            given = bool(getattr(args, "targets", None) or args.stop_at) or args.quick
            tg, stop = targets_at(recipe, args.dataset, s["targets"], s["stop"], given)
            sn = {**s, "targets": tg, "stop": stop}
            for seed in range(args.seed, args.seed + s["seeds"]):
                for policy in s["policies"]:
                    k += 1
                    run = PaperRun(policy, seed)
                    t = time.monotonic()
                    run_once(b.url, f"paper{k}", n, run, a, sn, Path(tmp))
                    real_s.append(time.monotonic() - t)
                    mean_run = sum(real_s) / len(real_s)
                    if not args.no_sim and step is None and run.step_s:
                        step, source = run.step_s, f"{policy} seed {seed}"
                    sim_now = seed < args.seed + args.sim_seeds and not run.failed
                    est = sum(sim_s) / len(sim_s) if sim_s else SIM_SLACK * mean_run
                    if (
                        sim_now
                        and not args.no_sim
                        and not sim_fits(
                            time.monotonic() - started,
                            args.budget,
                            total - k,
                            mean_run,
                            est,
                        )
                    ):
                        run.sim_skipped, sim_now = True, False
                    if not args.no_sim and sim_now:
                        if step is None:  # no compute time measured: time one here
                            step, source = step_in_process(a, n), "in-process"
                        # the run's own step when it has one: the box's load moves
                        t = time.monotonic()
                        simulate_run(run, n, run.step_s or step, a, sn)
                        sim_s.append(time.monotonic() - t)
                    runs.append(run)
                    if progress is not None:
                        progress(n, run)
            out[str(n)] = {"step_s": step, "step_from": source, "runs": runs,
                           "lr": recipe.lr, "max_time": recipe.max_time,
                           "targets": tg, "stop": stop,
                           "rows": build_rows(runs, s["policies"],
                                              tg)}  # fmt: skip
    return out


def _note(n: int, run: PaperRun) -> None:
    what = (f"FAILED: {run.error}" if run.failed else
            ", ".join(f"t{k} {'-' if v is None else f'{v:.1f}'}"
                      for k, v in run.times.items()))  # fmt: skip
    if run.simulated:
        what += " | sim " + ", ".join(
            f"t{k} {'-' if v is None else f'{v:.1f}'}" for k, v in run.sim_times.items()
        )
    print(f"  N={n} seed {run.seed} {run.policy}: {what}", file=sys.stderr, flush=True)


def text_lines(args: Any, s: dict[str, Any], n: str, r: dict[str, Any]) -> list[str]:
    """One worker count's header, table and the lines under it, as printed."""
    sn = {**s, "targets": r["targets"], "stop": r["stop"]}
    notes = cpu_lines(r["runs"], s["disturb"]["share"])
    notes += stale_lines(r["runs"], s["policies"], r["stop"])
    start = start_line(r["runs"], int(n))
    return [
        header(args, sn, n, r),
        table(r["rows"], sn["targets"]),
        *goal_lines(r, sn, int(n)),
        *notes,
        *([start] if start else []),
        *failure_lines(r["runs"]),
    ]


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        s = settings(args)
        _check(args, s)
        results = measure(args, s, progress=_note)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"edgeps bench paper: {exc}", file=sys.stderr)
        return 2
    wall = round(time.monotonic() - started, 1)
    if args.plot:
        from edgeps.lab.bench.paper_plot import plot

        try:
            plot(results, s, args.plot)
        except (ImportError, OSError, ValueError) as exc:
            print(f"edgeps bench paper: no plot: {exc}", file=sys.stderr)
    if args.json:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        bounds = {n: update_bound(s["disturb"], n) for n in s["workers"]}
        config.update(s, schedule_bound=schedule_bound(s["disturb"]),
                      update_bound=bounds)  # fmt: skip
        body = {
            n: {"step_s": r["step_s"], "step_from": r["step_from"],
                "lr": r["lr"], "max_time": r["max_time"],
                "targets": r["targets"], "stop": r["stop"],
                "rows": [x.to_dict() for x in r["rows"]],
                "goals": ratios(r["rows"], min(r["targets"])),
                "staleness": stale_summary(r["runs"], r["stop"]),
                "runs": [dataclasses.asdict(x) for x in r["runs"]]}
            for n, r in results.items()
        }  # fmt: skip
        print(json.dumps({"config": config, "results": body, "wall_seconds": wall,
                          "load": os.getloadavg()},
                         default=lambda x: None))  # fmt: skip
        return 0
    for n, r in results.items():
        print("\n" + "\n".join(text_lines(args, s, n, r)))
    print(f"\n{sum(len(r['runs']) for r in results.values())} runs in {wall:.0f} s "
          f"wall, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    return 0
