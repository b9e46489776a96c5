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
differ in timing only. A run that fails (serve or emulate exits
non-zero, or serve prints no JSON) is a failed cell with its stderr tail.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edgeps.lab.bench.policies_table import BrokerRun, build_rows, failure_lines, table
from edgeps.lab.matrix import grid as matrix

POLICIES = ("bsp", "asp", "dsp", "kofn:auto")
SCENARIOS = ("stragglers", "mixed", "lossy")
DATASET = "sensors"  # IID: what `edgeps emulate` splits (it has no Dirichlet split)
TAIL_LINES = 8


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--workers", type=int, default=8, help="emulated sensors")
    parser.add_argument("--seeds", type=int, default=3, help="runs per cell (median)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--balance", choices=("off", "on", "both"), default="both")
    parser.add_argument("--max-time", type=float, default=40.0, help="s per run")
    parser.add_argument(
        "--target-accuracy",
        type=float,
        default=None,
        help=f"default: the matrix's for {DATASET}, {matrix.DATASETS[DATASET][1]:g}",
    )
    parser.add_argument("--serve-args", default="", help="more flags for every serve")
    parser.add_argument("--emulate-args", default="", help="more flags for emulate")
    parser.add_argument("--no-sim", action="store_true", help="skip the simulator")
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def _edgeps(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgeps", *args]


def _tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """Wait up to ``timeout`` s, else kill: the exit code, None if killed."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        return None


def serve_command(
    url: str, job: str, policy: str, balance: bool, seed: int, args: Any
) -> list[str]:
    """`edgeps serve` for one run, with the simulator's lr and evaluation interval."""
    cell = matrix.Cell(DATASET, args.workers, "homogeneous", balance)
    sim = matrix.config(cell, policy, seed, args.max_time)  # for lr and eval interval
    cmd = _edgeps(
        "serve", "--broker", url, "--job", job, "--policy", policy,
        "--dataset", DATASET, "--seed", str(seed), "--lr", str(sim.lr),
        "--lr-workers", str(sim.lr_workers),
        "--eval-interval", str(sim.eval_interval),
        "--target-accuracy", str(target_of(args)),
        "--max-time", str(args.max_time), "--json", "--quiet",
        *shlex.split(getattr(args, "serve_args", "")),
    )  # fmt: skip
    return [*cmd, "--balance"] if balance else cmd


def target_of(args: Any) -> float:
    """The target accuracy of the runs: the matrix's for the dataset, unless given."""
    given = getattr(args, "target_accuracy", None)
    return matrix.DATASETS[DATASET][1] if given is None else float(given)


def emulate_command(
    url: str, job: str, scenario: str, seed: int, args: Any
) -> list[str]:
    return _edgeps(
        "emulate", "--broker", url, "--job", job, "--workers", str(args.workers),
        "--scenario", scenario, "--dataset", DATASET, "--seed", str(seed),
        "--max-time", str(args.max_time + 30), "--json",
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
                serve_command(url, job, run.policy, run.balance, run.seed, args),
                stdout=subprocess.PIPE, stderr=se,
            )  # fmt: skip
            # the sensors wait for the job's retained MODEL: no head start needed
            emu = subprocess.Popen(
                emulate_command(url, job, run.scenario, run.seed, args),
                stdout=eo, stderr=ee,
            )  # fmt: skip
            try:
                out, _ = serve.communicate(timeout=args.max_time + 60)
            except subprocess.TimeoutExpired:
                serve.kill()
                out, _ = serve.communicate(timeout=10)
                run.error = "serve did not end in --max-time + 60 s (killed)"
            # a serve that failed never publishes the MODEL the sensors wait for
            emu_code = _stop(emu, 60 if serve.returncode == 0 else 0.5)
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
        run.stderr_tail = _tail(which)
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
    return matrix.cells((DATASET,), (args.workers,), _split(args.scenarios), balance)


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def sim_times(
    grid: list[matrix.Cell], policies: list[str], args: Any
) -> dict[tuple[matrix.Cell, str], float | None]:
    """The simulator's median virtual time per (cell, policy) for the same job."""
    from edgeps.sim.types import EMULATOR_CPU_US

    results = matrix.run_matrix(
        grid,
        policies,
        seeds=args.seeds,
        first_seed=args.seed,
        max_time=max(args.max_time, matrix.MAX_TIME),
        overrides={
            "target_accuracy": target_of(args),
            "emulator_cpu_us": EMULATOR_CPU_US,
        },
    )
    return {(r.cell, p): e.time for r in results for p, e in r.entries.items()}


def measure(args: Any, progress: Any = None) -> tuple[list[Any], dict[str, Any]]:
    """Every run of the slice on one private mosquitto; the rows and run records."""
    from edgeps.transport.broker import start_mosquitto

    policies, grid = _split(args.policies), grid_of(args)
    sim = sim_times(grid, policies, args) if with_sim(args) else {}
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
                    run = BrokerRun(policy, cell.scenario, cell.balance, seed)
                    runs.append(run_once(b.url, f"pb{n}", run, args, Path(tmp)))
                    if progress is not None:
                        progress(run)
    rows = build_rows(grid, runs, sim)
    info = {
        "wall_seconds": round(time.monotonic() - started, 1),
        "runs": [dataclasses.asdict(r) for r in runs],
    }
    return rows, info


def _check(args: Any) -> None:
    from edgeps.policy import parse_policy
    from edgeps.workloads.scenarios import SCENARIOS as KNOWN

    for p in _split(args.policies):
        parse_policy(p)
    for s in _split(args.scenarios):
        if s not in KNOWN:
            raise ValueError(f"unknown scenario {s!r}; known: {', '.join(KNOWN)}")
    if not _split(args.policies) or not _split(args.scenarios):
        raise ValueError("need at least one policy and one scenario")
    if args.seeds < 1 or args.workers < 1 or args.max_time <= 0:
        raise ValueError("--seeds and --workers must be >= 1, --max-time > 0")


def _note(run: BrokerRun) -> None:
    bal = "on" if run.balance else "off"
    t = "-" if run.time_to_target is None else f"{run.time_to_target:.1f} s"
    what = f"FAILED: {run.error}" if run.failed else f"{t}, {run.updates} updates"
    print(f"  {run.scenario} bal {bal} seed {run.seed} {run.policy}: {what}",
          file=sys.stderr, flush=True)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        _check(args)
        rows, info = measure(args, progress=_note)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"edgeps bench policies-broker: {exc}", file=sys.stderr)
        return 2
    policies = _split(args.policies)
    target = target_of(args)
    if args.json:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        sim_max_time = max(args.max_time, matrix.MAX_TIME)
        config.update(dataset=DATASET, target_accuracy=target,
                      sim=with_sim(args), sim_max_time=sim_max_time)  # fmt: skip
        out = {"config": config, "rows": [r.to_dict(policies) for r in rows], **info}
        print(json.dumps(out, default=lambda x: None))
        return 0
    print(
        f"{DATASET}, {args.workers} emulated sensors on a real mosquitto: wall "
        f"seconds from the first HELLO to accuracy {target:g}, final accuracy "
        f"(max {args.max_time:g} s), medians of {args.seeds} seeds, * = best in "
        f"the row; sim s = the policy matrix's virtual seconds for the same cell"
    )
    print(table(rows, policies, with_sim=with_sim(args)))
    for line in failure_lines(rows):
        print(line)
    print(f"\n{len(info['runs'])} runs in {info['wall_seconds']:.0f} s wall")
    return 0
