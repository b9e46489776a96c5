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
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edgeps.lab.bench.paper_plan import (
    SIM_SLACK,
    measured_step,
    parse_disturb,
    plan_for,
    scenario_text,
    schedule_bound,
    sim_fits,
    stop_target,
    update_bound,
)  # fmt: skip
from edgeps.lab.bench.paper_sim import simulate_run, step_in_process
from edgeps.lab.bench.paper_stale import stale_lines, stale_summary, update_curve
from edgeps.lab.bench.paper_table import (
    PaperRun,
    accuracy_curve,
    build_rows,
    cpu_lines,
    failure_lines,
    goal_lines,
    header,
    idle_fraction,
    ratios,
    read_metrics,
    staleness_series,
    table,
    target_key,
    time_to,
)  # fmt: skip

POLICIES = ("bsp", "ssp:1", "ssp:2", "ssp:4", "ssp:8", "dsp", "dsp:w=4,grace=1", "asp")
QUICK_POLICIES = ("bsp", "ssp:2", "dsp", "asp")
TAIL_LINES = 8


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
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument(
        "--eval-interval",
        type=float,
        default=None,
        help="s (default: mnist 1, fashion-mnist 3)",
    )
    parser.add_argument("--max-time", type=float, default=40.0, help="s per run")
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
    if min(s["workers"]) < 2 or s["seeds"] < 1 or args.max_time <= 0:
        raise ValueError("--workers must be >= 2, --seeds >= 1, --max-time > 0")
    if not all(0 < t <= 1 for t in [*s["targets"], s["stop"]]):
        raise ValueError("--targets and --stop-at are accuracies in (0, 1]")
    if s["eval_interval"] <= 0 or args.sim_seeds < 0:
        raise ValueError("--eval-interval must be > 0, --sim-seeds >= 0")


def _edgeps(*args: str) -> list[str]:
    return [sys.executable, "-m", "edgeps", *args]


def _tail(path: Path) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-TAIL_LINES:])
    except OSError:
        return ""


def _kill(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(10)


def disturbed_worker(n: int, seed: int, scenario: str = "disturbed") -> tuple[str, Any]:
    """The worker id the ``disturbed`` scenario picks for the seed, and its bursts."""
    from edgeps.workloads.scenarios import make_scenario

    sc = make_scenario(scenario, n, seed)
    wid, prof = next((w, p) for w, p in sc.profiles.items() if p.bursts)
    return wid, prof.bursts


def run_once(url: str, job: str, n: int, run: PaperRun, args: Any,
             s: dict[str, Any], workdir: Path) -> PaperRun:  # fmt: skip
    """One serve, ``n`` workers and the competitor; fills ``run`` in."""
    from edgeps.lab import disturb
    from edgeps.lab.bench.compression import Sniffer
    from edgeps.lab.bench.disturb_worker import CpuSampler, split_cpu
    from edgeps.workloads.scenarios import worker_ids

    metrics = workdir / f"{job}.metrics.jsonl"
    serve_err = workdir / f"{job}.serve.err"
    targets = s["targets"]
    grace = s["startup"] + 2.0 * n  # N processes start on the box's cores
    wid_d, bursts = disturbed_worker(n, run.seed, s["scenario"])
    run.disturbed = wid_d
    sniff = Sniffer(url, job)
    clock = time.time() - time.monotonic()  # monotonic -> epoch
    serve = None
    workers: dict[str, subprocess.Popen[bytes]] = {}
    handle = None
    try:
        with serve_err.open("wb") as se:
            serve = subprocess.Popen(_edgeps(
                "serve", "--broker", url, "--job", job, "--policy", run.policy,
                "--dataset", args.dataset, "--model", args.model,
                "--seed", str(run.seed), "--lr", str(args.lr),
                "--optimizer", args.optimizer,
                "--eval-interval", str(s["eval_interval"]), "--metrics-interval", "0.5",
                "--metrics-out", str(metrics), "--target-accuracy", str(s["stop"]),
                "--max-time", str(args.max_time), "--json", "--quiet",
            ), stdout=subprocess.PIPE, stderr=se)  # fmt: skip
            for i, wid in enumerate(worker_ids(n)):
                workers[wid] = subprocess.Popen(_edgeps(
                    "worker", "--broker", url, "--job", job, "--id", wid,
                    "--emulated", f"{args.dataset}:{i}/{n}", "--seed", str(run.seed),
                    "--batch", str(args.batch), "--log-level", "warning",
                ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            # the competitor's clock starts with the workers, as the scenario's
            handle = disturb.start(workers[wid_d].pid, schedule=bursts,
                                   limit=args.max_time + grace + 30)  # fmt: skip
            run.competitor = handle.mode
            cpu = CpuSampler(workers[wid_d].pid, handle.origin)
            try:
                out, _ = serve.communicate(timeout=args.max_time + grace)
            except subprocess.TimeoutExpired:
                serve.kill()
                out, _ = serve.communicate(timeout=10)
                run.error = (f"serve did not end in --max-time + {grace:g} s "
                             "(killed)")  # fmt: skip
            run.cpu_in, run.cpu_out = split_cpu(cpu.stop(), bursts)
        if not run.error and serve.returncode != 0:
            run.error = f"serve exited {serve.returncode}"
        if not run.error:
            try:
                summary = json.loads(out)
            except ValueError:
                run.error = "serve printed no JSON summary"
            else:
                _fill(run, summary, sniff, metrics, clock, n, targets)
    finally:
        if handle is not None:
            handle.stop()
        for p in workers.values():
            if p.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(5 if not run.error else 0.1)
            _kill(p)
        _kill(serve)
        sniff.close()
    if run.error:
        run.stderr_tail = _tail(serve_err)
    return run


def _fill(run: PaperRun, summary: dict[str, Any], sniff: Any, metrics: Path,
          clock: float, n: int, targets: list[float]) -> None:  # fmt: skip
    acc = summary.get("accuracy")
    run.final_accuracy = float(acc) if isinstance(acc, (int, float)) else None
    run.max_staleness = int(summary.get("max_staleness", 0))
    run.stop_reason = str(summary.get("stop_reason", ""))
    run.pushes = {w: int(v.get("accepted", 0))
                  for w, v in summary.get("workers", {}).items()}  # fmt: skip
    with sniff.lock:
        t0, up, down = sniff.first_hello, sniff.update_bytes, sniff.host_bytes
    if t0 is None:
        run.error = "the broker client saw no HELLO"
        return
    run.bytes_per_worker = (up + down) / n
    try:
        snaps = read_metrics(metrics.read_text().splitlines())
    except OSError:
        snaps = []
    start = t0 + clock
    run.curve = accuracy_curve(snaps, start)
    run.times = {target_key(t): time_to(run.curve, t) for t in targets}
    run.idle_fraction = idle_fraction(snaps)
    run.staleness = staleness_series(snaps, run.disturbed, start)
    run.updates = update_curve(snaps)
    run.end_s = time.time() - start
    run.step_s = measured_step(snaps, run.disturbed)


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
            for seed in range(args.seed, args.seed + s["seeds"]):
                for policy in s["policies"]:
                    k += 1
                    run = PaperRun(policy, seed)
                    t = time.monotonic()
                    run_once(b.url, f"paper{k}", n, run, args, s, Path(tmp))
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
                            step, source = step_in_process(args, n), "in-process"
                        # the run's own step when it has one: the box's load moves
                        t = time.monotonic()
                        simulate_run(run, n, run.step_s or step, args, s)
                        sim_s.append(time.monotonic() - t)
                    runs.append(run)
                    if progress is not None:
                        progress(n, run)
            out[str(n)] = {"step_s": step, "step_from": source, "runs": runs,
                           "rows": build_rows(runs, s["policies"],
                                              s["targets"])}  # fmt: skip
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
    lo = min(s["targets"])
    if args.json:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        bounds = {n: update_bound(s["disturb"], n) for n in s["workers"]}
        config.update(s, schedule_bound=schedule_bound(s["disturb"]),
                      update_bound=bounds)  # fmt: skip
        body = {
            n: {"step_s": r["step_s"], "step_from": r["step_from"],
                "rows": [x.to_dict() for x in r["rows"]],
                "goals": ratios(r["rows"], lo),
                "staleness": stale_summary(r["runs"], s["stop"]),
                "runs": [dataclasses.asdict(x) for x in r["runs"]]}
            for n, r in results.items()
        }  # fmt: skip
        print(json.dumps({"config": config, "results": body, "wall_seconds": wall,
                          "load": os.getloadavg()},
                         default=lambda x: None))  # fmt: skip
        return 0
    for n, r in results.items():
        print("\n" + header(args, s, n, r))
        print(table(r["rows"], s["targets"]))
        notes = cpu_lines(r["runs"], s["disturb"]["share"])
        notes += stale_lines(r["runs"], s["policies"], s["stop"])
        for line in goal_lines(r, s, int(n)) + notes + failure_lines(r["runs"]):
            print(line)
    print(f"\n{sum(len(r['runs']) for r in results.values())} runs in {wall:.0f} s "
          f"wall, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    return 0
