"""`edgeps bench policies-broker`: a slice of the policy matrix on a real broker.

For each policy, scenario, balancing and seed: a real `edgeps serve --policy P
[--balance]` and `edgeps emulate --workers N --scenario S --seed K` (two
processes) on a private mosquitto on 127.0.0.1, a job of their own each run.
A passive client on the broker (the compression bench's `Sniffer`) times
each run from the first HELLO to the MODEL ``done`` serve publishes when it
reaches the target; serve's JSON gives the final accuracy and the updates it
applied. Per cell: medians over seeds, the best policy per row marked, and
next to it the simulator's time for the same cell and target, run in-process
by the policy matrix's own code (`edgeps.lab.matrix.grid.run_matrix`) with
the emulator's CPU charged to the host (`edgeps simulate --emulated`), and
real/sim. Serve gets the simulator's step and evaluation interval, so the two
differ in timing only. ``--dataset`` also takes the conv matrix's datasets:
their job, time-scaled, and the simulator's first choice beside the real one
(``edgeps.lab.bench.policies_conv``). ``--join`` prints slices measured
apart as one table. A run that fails (serve or emulate exits
non-zero, or serve prints no JSON) is a failed cell with its stderr tail.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from edgeps.lab.bench import policies_conv as convjob
from edgeps.lab.bench.policies_table import BrokerRun, build_rows
from edgeps.lab.bench.procs import edgeps, stop, tail
from edgeps.lab.matrix import grid as matrix

POLICIES = ("bsp", "asp", "dsp", "kofn:auto")
SCENARIOS = ("stragglers", "mixed", "lossy")
DATASET = "sensors"  # IID: what `edgeps emulate` splits (it has no Dirichlet split)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument(
        "--dataset",
        default=DATASET,
        help="comma-separated: sensors, or conv jobs "
        f"({', '.join(convjob.TIME_SCALE)}; default: {DATASET})",
    )
    parser.add_argument(
        "--time-scale",
        type=float,
        default=None,
        metavar="K",
        help="conv jobs: divide the job's times by K (default: the dataset's, "
        + ", ".join(f"{d} {k:g}" for d, k in convjob.TIME_SCALE.items())
        + ")",
    )
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--workers", type=int, default=8, help="emulated sensors")
    parser.add_argument("--seeds", type=int, default=3, help="runs per cell (median)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--balance", choices=("off", "on", "both"), default="both")
    parser.add_argument(
        "--max-time",
        type=float,
        default=None,
        help="s per run (default: 40; a conv job's length / K)",
    )
    parser.add_argument(
        "--target-accuracy",
        type=float,
        default=None,
        help=f"default: the matrix's for the dataset ({DATASET}: "
        f"{matrix.DATASETS[DATASET][1]:g})",
    )
    parser.add_argument(
        "--join",
        metavar="FILES",
        help="comma-separated --json outputs of earlier slices: one table of them",
    )
    parser.add_argument("--serve-args", default="", help="more flags for every serve")
    parser.add_argument("--emulate-args", default="", help="more flags for emulate")
    parser.add_argument("--no-sim", action="store_true", help="skip the simulator")
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def conv_config(
    dataset: str, scenario: str, policy: str, balance: bool, seed: int, args: Any
) -> Any:
    """A conv run's job (``policies_conv.sim_config``), with --target-accuracy
    and --max-time where given: what serve, emulate and the simulator run."""
    cell = matrix.Cell(dataset, args.workers, scenario, balance)
    k = convjob.time_scale(dataset, getattr(args, "time_scale", None))
    cfg = convjob.sim_config(cell, policy, seed, k)
    given = {"target_accuracy": getattr(args, "target_accuracy", None),
             "max_time": getattr(args, "max_time", None)}  # fmt: skip
    return dataclasses.replace(cfg, **{k: v for k, v in given.items() if v})


def max_time_of(args: Any, dataset: str = DATASET) -> float:
    """Seconds a run may last: --max-time, else 40 (a conv job: its scaled length)."""
    if getattr(args, "max_time", None):
        return float(args.max_time)
    if convjob.is_conv(dataset):
        return conv_config(dataset, "homogeneous", "asp", False, 0, args).max_time
    return 40.0


def serve_command(
    url: str, job: str, policy: str, balance: bool, seed: int, args: Any,
    dataset: str = DATASET, scenario: str = "homogeneous",
) -> list[str]:  # fmt: skip
    """`edgeps serve` for one run, with the simulator's lr and evaluation interval."""
    if convjob.is_conv(dataset):
        cfg = conv_config(dataset, scenario, policy, balance, seed, args)
        job_flags = convjob.serve_flags(cfg)
    else:
        cell = matrix.Cell(dataset, args.workers, "homogeneous", balance)
        sim = matrix.config(cell, policy, seed, max_time_of(args))  # lr, interval
        job_flags = [
            "--dataset", dataset, "--lr", str(sim.lr),
            "--lr-workers", str(sim.lr_workers),
            "--eval-interval", str(sim.eval_interval),
            "--target-accuracy", str(target_of(args, dataset)),
            "--max-time", str(max_time_of(args)),
        ]  # fmt: skip
    cmd = edgeps(
        "serve", "--broker", url, "--job", job, "--policy", policy,
        "--seed", str(seed), *job_flags, "--json", "--quiet",
        *shlex.split(getattr(args, "serve_args", "")),
    )  # fmt: skip
    return [*cmd, "--balance"] if balance else cmd


def target_of(args: Any, dataset: str = DATASET) -> float:
    """The target accuracy of the runs: the matrix's for the dataset, unless given."""
    given = getattr(args, "target_accuracy", None)
    if given is not None:
        return float(given)
    if convjob.is_conv(dataset):
        return convjob.conv.JOBS[dataset].target
    return matrix.DATASETS[dataset][1]


def emulate_command(
    url: str, job: str, scenario: str, seed: int, args: Any, dataset: str = DATASET
) -> list[str]:
    if convjob.is_conv(dataset):
        cfg = conv_config(dataset, scenario, "asp", False, seed, args)
        board_flags = convjob.emulate_flags(cfg)
    else:
        board_flags = ["--scenario", scenario, "--dataset", dataset]
    return edgeps(
        "emulate", "--broker", url, "--job", job, "--workers", str(args.workers),
        *board_flags, "--seed", str(seed),
        "--max-time", str(max_time_of(args, dataset) + 30), "--json",
        *shlex.split(getattr(args, "emulate_args", "")),
    )  # fmt: skip


def emulate_out(workdir: Path, job: str) -> Path:
    """Where `run_once` keeps what emulate printed (its JSON, with --json)."""
    return workdir / f"{job}.emulate.out"


def run_once(url: str, job: str, run: BrokerRun, args: Any, workdir: Path) -> BrokerRun:
    """One serve + emulate pair on the broker at ``url``; fills ``run`` in.

    What emulate printed stays in ``emulate_out(workdir, job)``.
    """
    from edgeps.lab.bench.compression import Sniffer

    serve_err, emu_err = workdir / f"{job}.serve.err", workdir / f"{job}.emulate.err"
    sniff = Sniffer(url, job)
    serve = emu = None
    try:
        with (
            serve_err.open("wb") as se,
            emu_err.open("wb") as ee,
            emulate_out(workdir, job).open("wb") as eo,
        ):
            serve = subprocess.Popen(
                serve_command(url, job, run.policy, run.balance, run.seed, args,
                              run.dataset, run.scenario),
                stdout=subprocess.PIPE, stderr=se,
            )  # fmt: skip
            # the sensors wait for the job's retained MODEL: no head start needed
            emu = subprocess.Popen(
                emulate_command(url, job, run.scenario, run.seed, args, run.dataset),
                stdout=eo, stderr=ee,
            )  # fmt: skip
            try:
                out, _ = serve.communicate(timeout=max_time_of(args, run.dataset) + 60)
            except subprocess.TimeoutExpired:
                serve.kill()
                out, _ = serve.communicate(timeout=10)
                run.error = "serve did not end in --max-time + 60 s (killed)"
            # a serve that failed never publishes the MODEL the sensors wait for
            emu_code = stop(emu, 60 if serve.returncode == 0 else 0.5)
        if not run.error and serve.returncode != 0:
            run.error = f"serve exited {serve.returncode}"
        elif not run.error and emu_code != 0:
            run.error = (
                "emulate did not end within 60 s of serve (killed)"
                if emu_code is None
                else f"emulate exited {emu_code}"
            )
        if not run.error:
            try:
                summary = json.loads(out)
            except ValueError:
                run.error = "serve printed no JSON summary"
            else:
                _fill(run, summary, sniff)
    finally:
        for p in (emu, serve):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
        sniff.close()
    if run.error:
        which = emu_err if run.error.startswith("emulate") else serve_err
        run.stderr_tail = tail(which)
    return run


def _fill(run: BrokerRun, summary: dict[str, Any], sniff: Any) -> None:
    acc = summary.get("accuracy")
    run.final_accuracy = float(acc) if isinstance(acc, (int, float)) else None
    run.updates = int(summary.get("updates", 0))
    run.stop_reason = str(summary.get("stop_reason", ""))
    run.elapsed = summary.get("elapsed")
    run.updates_per_s = float(summary.get("updates_per_s", 0.0))
    run.max_staleness = int(summary.get("max_staleness", 0))
    workers = summary.get("workers", {}).values()
    run.rejected = sum(int(w.get("rejected", 0)) for w in workers)
    run.state = str(summary.get("state", ""))
    if run.final_accuracy is None or not math.isfinite(run.final_accuracy):
        run.error = f"serve's JSON gave no final accuracy ({acc!r})"
        return
    with sniff.lock:
        t0, done = sniff.first_hello, sniff.done_at
        hellos, first_update = sorted(sniff.hellos.values()), sniff.first_update
        closing = dict(getattr(sniff, "closing", {}))
    if hellos and closing:
        run.closing_up = closing["up"] / len(hellos)
        run.closing_down = closing["down"] / len(hellos) + closing["shared"]
    if t0 is not None:
        run.joins = [round(t - t0, 4) for t in hellos]
        if first_update is not None:
            run.first_update = round(first_update - t0, 4)
    if run.stop_reason != "target_accuracy":
        return
    if t0 is None or done is None:
        run.error = "the broker client saw no HELLO or no MODEL done"
    else:
        run.time_to_target = done - t0


def with_sim(args: Any) -> bool:
    """The simulator column: unless --no-sim."""
    return not args.no_sim


def grid_of(args: Any) -> list[matrix.Cell]:
    balance = {"off": (False,), "on": (True,), "both": (False, True)}[args.balance]
    datasets = _split(getattr(args, "dataset", DATASET))
    return matrix.cells(datasets, (args.workers,), _split(args.scenarios), balance)


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def policy_list(text: str) -> list[str]:
    """``--policies``: "bsp,dsp:rounds=8,damp=1" is two policies, as in simulate."""
    from edgeps.sim.compare import split_policies

    return split_policies(text) if text.strip() else []


def sim_cells(
    grid: list[matrix.Cell], policies: list[str], args: Any
) -> list[matrix.CellResult]:
    """The simulator's medians per cell for the same job: the policy matrix's
    code for tabular cells, `edgeps simulate --compare`'s for conv ones."""
    from edgeps.sim.types import EMULATOR_CPU_US

    tabular = [c for c in grid if not convjob.is_conv(c.dataset)]
    out = []
    for dataset in dict.fromkeys(c.dataset for c in tabular):
        out += matrix.run_matrix(
            [c for c in tabular if c.dataset == dataset],
            policies,
            seeds=args.seeds,
            first_seed=args.seed,
            max_time=max(max_time_of(args), matrix.MAX_TIME),
            overrides={
                "target_accuracy": target_of(args, dataset),
                "emulator_cpu_us": EMULATOR_CPU_US,
            },
        )
    for c in grid:
        if convjob.is_conv(c.dataset):
            k = convjob.time_scale(c.dataset, getattr(args, "time_scale", None))
            given = {"target_accuracy": args.target_accuracy,
                     "max_time": args.max_time}  # fmt: skip
            out.append(convjob.sim_cell(
                c, policies, args.seeds, args.seed, k,
                {key: v for key, v in given.items() if v},
            ))  # fmt: skip
    return out


def measure(args: Any, progress: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """Every run of the slice on one private mosquitto; the rows and run records."""
    from edgeps.transport.broker import start_mosquitto

    policies, grid = policy_list(args.policies), grid_of(args)
    sim = sim_cells(grid, policies, args) if with_sim(args) else []
    runs: list[BrokerRun] = []
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory(prefix="edgeps-pb-") as tmp,
        start_mosquitto() as b,
    ):
        n = 0
        for cell in grid:
            for seed in range(args.seed, args.seed + args.seeds):
                for policy in policies:
                    n += 1
                    run = BrokerRun(policy, cell.scenario, cell.balance, seed,
                                    dataset=cell.dataset)  # fmt: skip
                    runs.append(run_once(b.url, f"pb{n}", run, args, Path(tmp)))
                    if progress is not None:
                        progress(run)
    rows = build_rows(grid, runs, sim_cells=sim)
    info = {
        "wall_seconds": round(time.monotonic() - started, 1),
        "runs": [dataclasses.asdict(r) for r in runs],
    }
    return rows, info


def run(args: argparse.Namespace) -> int:
    from edgeps.lab.bench.policies_report import report

    return report(args)
