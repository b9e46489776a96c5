"""edgeps side by side with Flower: seconds to the target accuracy, same job on both.

Runs in edgeps' environment. Per scenario and seed:

- Flower: `export_job.py`'s job file (the emulator's shards, serve's test
  rows, model and initial weights, the job's lr and batch, H, the scenario's
  compute times) and `flower/run_flower.py` under Flower's own python
  (`flower/setup.sh` makes it): a Flower server and N client processes on a
  fresh 127.0.0.1 port, FedAvg, H local steps per round.
- edgeps: each row (``POLICY/hH``; ``fedavg/h8`` = `edgeps serve --policy
  fedavg --local-steps 8`) as `edgeps bench policies-broker` runs a cell:
  `edgeps serve` and `edgeps emulate` on a private mosquitto on 127.0.0.1,
  timed by a client on the broker from the first HELLO to the MODEL "done"
  (`edgeps.lab.bench.policies_broker.run_once`).

``--job lenet5`` runs the paper's job instead of the sensors one: LeNet-5 on
the bundled MNIST subset (4,000 / 1,000 digits), lr 0.05, target 0.95, each
emulated step 0.01 s x the model's FLOPs scale (``edgeps emulate
--compute-time``), Flower's clients computing with edgeps' kernels.

Flower runs at each H of ``--flower-steps`` (default: ``--local-steps`` and
1). Prints the medians over ``--seeds`` runs, edgeps' speed-up for fedavg over
Flower's FedAvg at the same H (same algorithm) and for its best row over
Flower's best row, against the goals (1.2x and 3x), and Flower's version.
Every process started here is killed by its id (Flower's launcher with its
clients by its process group); every wait is bounded.

    .venv/bin/python tools/peers/compare.py [--scenarios homogeneous,stragglers]
        [--workers 8] [--seeds 3] [--local-steps 8] [--max-time 60] [--json]
        [--job lenet5]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import export_job  # noqa: E402
import peer_table  # noqa: E402
from jobs import (  # noqa: E402
    JOBS,
    edgeps_flags,
    job_settings,
    rows_of,
    split,
)

RUN_FLOWER = HERE / "flower" / "run_flower.py"
FLOWER_PYTHON = HERE / "flower" / ".venv" / "bin" / "python"
FLOWER_SLACK = 180.0  # s past --max-time: imports of N client processes, shutdown


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--job", default="sensors", help=f"the job: {', '.join(JOBS)} (default sensors)"
    )
    parser.add_argument("--dataset", default=None, help="default: the job's")
    parser.add_argument("--model", default=None, help="default: the job's")
    parser.add_argument("--lr", type=float, default=None, help="default: the job's")
    parser.add_argument(
        "--compute-time",
        type=float,
        default=None,
        metavar="S",
        help="base seconds per emulated step (edgeps emulate --compute-time)",
    )
    parser.add_argument("--scenarios", default="homogeneous,stragglers")
    parser.add_argument("--workers", type=int, default=8, help="sensors / clients")
    parser.add_argument("--seeds", type=int, default=3, help="runs per row (median)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument(
        "--local-steps", type=int, default=8, help="H of Flower's clients"
    )
    parser.add_argument(
        "--flower-steps",
        default=None,
        help="H of each Flower row (default: --local-steps, and 1 for the sensors "
        "job); its best row "
        "is the one edgeps' best is compared with",
    )
    parser.add_argument(
        "--rows",
        default=None,
        help="edgeps rows, POLICY/hH, each with @lr=X for an lr of its own "
        "(default: fedavg:agg=mean/hH,fedbuff:k=4/hH and the job's per-step "
        "row: dsp; "
        "for lenet5 dsp@lr=0.02)",
    )
    parser.add_argument("--max-time", type=float, default=60.0, help="s per run")
    parser.add_argument("--target-accuracy", type=float, default=None)
    parser.add_argument("--flower-python", default=str(FLOWER_PYTHON))
    parser.add_argument("--no-flower", action="store_true")
    parser.add_argument(
        "--flower-runs",
        metavar="JSON",
        help="take Flower's runs from an earlier --json output instead of running it",
    )
    parser.add_argument("--no-edgeps", action="store_true")
    parser.add_argument("--json", action="store_true")


def target_of(args: Any) -> float:
    from edgeps.lab.bench import policies_broker

    job = job_settings(args)
    if job["target"] is not None:
        return float(job["target"])
    return float(policies_broker.target_of(args))


# -- Flower --


def flower_steps(args: Any) -> list[int]:
    if args.flower_steps is None:
        if not JOBS[args.job]["flower_h1"]:
            return [args.local_steps]
        return sorted({args.local_steps, 1}, reverse=True)
    return [int(h) for h in split(args.flower_steps)]


def run_flower(
    scenario: str, seed: int, h: int, args: Any, workdir: Path
) -> peer_table.PeerRun:
    """One Flower job at H local steps; its JSON goes to ``args.flower_results``."""
    from edgeps.transport.broker import free_port

    run = peer_table.PeerRun("flower", f"FedAvg/h{h}", scenario, seed)
    npz = workdir / f"flower-{scenario}-{seed}-h{h}.npz"
    job = job_settings(args)
    arrays = export_job.job_arrays(
        dataset=job["dataset"],
        model=job["model"],
        lr=job["lr"],
        compute_time=job["compute_time"],
        n_workers=args.workers,
        scenario=scenario,
        seed=seed,
        local_steps=h,
        target=target_of(args),
    )
    np.savez(npz, **arrays)
    err = workdir / f"flower-{scenario}-{seed}-h{h}.err"
    cmd = [
        args.flower_python, str(RUN_FLOWER), str(npz),
        "--port", str(free_port()), "--max-time", str(args.max_time),
    ]  # fmt: skip
    with err.open("wb") as fe:
        # a session of its own: the launcher and its clients end as one group
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=fe, start_new_session=True
        )
        try:
            out, _ = proc.communicate(timeout=args.max_time + FLOWER_SLACK)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, _ = proc.communicate(timeout=10)
            run.error = f"Flower did not end in --max-time + {FLOWER_SLACK:g} s"
        finally:
            _kill_group(proc)
    if not run.error and proc.returncode != 0:
        run.error = f"run_flower.py exited {proc.returncode}: {_tail(err)}"
    if not run.error:
        try:
            result = json.loads(out.decode().strip().splitlines()[-1])
        except (ValueError, IndexError):
            run.error = f"run_flower.py printed no JSON: {_tail(err)}"
        else:
            run.time_to_target = result.get("time_to_target")
            run.final_accuracy = result.get("final_accuracy")
            run.rounds = result.get("rounds")
            carried = [
                result.get(k) for k in ("payload_bytes_down", "payload_bytes_up")
            ]
            if all(isinstance(b, int) for b in carried):
                run.bytes_per_worker = sum(carried) / args.workers
            args.flower_results.append(result)
    return run


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def _tail(path: Path, lines: int = 6) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return " | ".join(text.strip().splitlines()[-lines:])


def previous_flower(args: Any, scenario: str, seed: int) -> list[peer_table.PeerRun]:
    """Flower's runs of ``scenario`` and ``seed`` in the ``--flower-runs`` file."""
    data = json.loads(Path(args.flower_runs).read_text())
    runs = peer_table.runs_from(data, "flower", [scenario], [seed])
    args.flower_results.extend(
        r
        for r in data.get("flower", [])
        if (r["scenario"], r["seed"]) == (scenario, seed)
    )
    return runs


# -- edgeps --


def run_edgeps(
    url: str, job: str, row: str, scenario: str, seed: int, args: Any, workdir: Path
) -> peer_table.PeerRun:
    """One serve + emulate pair on the broker at ``url``, timed as the bench times.

    A second passive client counts the job's payload bytes: every UPDATE the
    sensors published and everything serve published, over the sensors.
    """
    from edgeps.lab.bench import policies_broker
    from edgeps.lab.bench.compression import Sniffer
    from edgeps.lab.bench.policies_table import BrokerRun
    from edgeps.lab.matrix.grid import split_row

    name, lr = peer_table.split_lr(row)
    policy, h = split_row(name)
    settings = job_settings(args)
    if lr is not None:  # the row's own lr, in place of the job's
        settings["lr"] = lr
    serve_more, emulate_more = edgeps_flags(settings)
    local = "" if h == 1 else f"--local-steps {h}"
    bench_args = argparse.Namespace(
        workers=args.workers,
        max_time=args.max_time,
        target_accuracy=target_of(args),
        serve_args=f"{local} {serve_more}".strip(),
        emulate_args=emulate_more,
    )
    broker_run = BrokerRun(policy, scenario, False, seed)
    counter = Sniffer(url, job)
    try:
        policies_broker.run_once(url, job, broker_run, bench_args, workdir)
    finally:
        counter.close()
    out = peer_table.PeerRun("edgeps", row, scenario, seed)
    out.time_to_target = broker_run.time_to_target
    out.final_accuracy = broker_run.final_accuracy
    with counter.lock:
        out.bytes_per_worker = (
            counter.update_bytes + counter.host_bytes
        ) / args.workers
    if broker_run.failed:
        tail = broker_run.stderr_tail.replace("\n", " | ")
        out.error = f"{broker_run.error}: {tail}"
    return out


# -- the whole comparison --


def measure(args: Any, progress: Any = None) -> list[peer_table.PeerRun]:
    """Flower then every edgeps row, seed by seed, so drifting load hits both."""
    from edgeps.transport.broker import start_mosquitto

    rows = rows_of(args)
    runs: list[peer_table.PeerRun] = []

    def note(run: peer_table.PeerRun) -> None:
        runs.append(run)
        if progress is not None:
            progress(run)

    with tempfile.TemporaryDirectory(prefix="edgeps-peers-") as tmp:
        workdir = Path(tmp)
        broker = None if args.no_edgeps else start_mosquitto()
        try:
            n = 0
            for scenario in split(args.scenarios):
                for seed in range(args.seed, args.seed + args.seeds):
                    if args.flower_runs:
                        for run in previous_flower(args, scenario, seed):
                            note(run)
                    for h in [] if args.no_flower else flower_steps(args):
                        note(run_flower(scenario, seed, h, args, workdir))
                    for row in [] if broker is None else rows:
                        n += 1
                        url = broker.url
                        note(
                            run_edgeps(
                                url, f"pp{n}", row, scenario, seed, args, workdir
                            )
                        )
        finally:
            if broker is not None:
                broker.close()
    return runs


def _check(args: Any) -> None:
    from edgeps.lab.matrix.grid import split_row
    from edgeps.policy import parse_policy
    from edgeps.workloads.scenarios import SCENARIOS

    job = job_settings(args)
    export_job.job_spec(job["dataset"], job["model"], args.seed)  # a clear error
    if job["lr"] is not None and not job["lr"] > 0:
        raise ValueError("--lr must be > 0")
    if job["compute_time"] is not None and not job["compute_time"] > 0:
        raise ValueError("--compute-time must be > 0")
    for row in rows_of(args):
        parse_policy(split_row(peer_table.split_lr(row)[0])[0])
    for s in split(args.scenarios):
        if s not in SCENARIOS:
            raise ValueError(f"unknown scenario {s!r}; known: {', '.join(SCENARIOS)}")
    if args.seeds < 1 or args.workers < 1 or args.local_steps < 1:
        raise ValueError("--seeds, --workers and --local-steps must be >= 1")
    if any(h < 1 for h in flower_steps(args)):
        raise ValueError("--flower-steps must be integers >= 1")
    if not args.max_time > 0:
        raise ValueError("--max-time must be > 0")
    if args.flower_runs:
        args.no_flower = True
        if not Path(args.flower_runs).is_file():
            raise ValueError(f"--flower-runs {args.flower_runs}: no such file")
    if not args.no_flower and not Path(args.flower_python).exists():
        raise ValueError(
            f"no Flower python at {args.flower_python}: "
            "run bash tools/peers/flower/setup.sh first (or --no-flower)"
        )


def _note(run: peer_table.PeerRun) -> None:
    t = "-" if run.time_to_target is None else f"{run.time_to_target:.1f} s"
    what = f"FAILED: {run.error}" if run.failed else f"{t}, acc {run.final_accuracy}"
    rounds = "" if run.rounds is None else f", {run.rounds} rounds"
    print(f"  {run.scenario} seed {run.seed} {run.side} {run.row}: {what}{rounds}",
          file=sys.stderr, flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    configure(parser)
    args = parser.parse_args(argv)
    args.flower_results = []
    started = time.monotonic()
    try:
        _check(args)
        runs = measure(args, progress=_note)
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        print(f"compare: {exc}", file=sys.stderr)
        return 2
    comparisons = peer_table.compare(runs, split(args.scenarios))
    versions = sorted({r["flwr_version"] for r in args.flower_results})
    flwr_version = ", ".join(versions) or None
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if args.json:
        config = {
            k: v for k, v in vars(args).items() if k not in ("flower_results", "json")
        }
        config["rows"] = rows_of(args)
        config["flower_steps"] = flower_steps(args)
        config["target_accuracy"] = target_of(args)
        config["job_settings"] = job_settings(args)
        config["load"] = os.getloadavg()
        out = {
            "date": date,
            "flwr_version": flwr_version,
            "config": config,
            "comparisons": [c.to_dict() for c in comparisons],
            "runs": [vars(r) for r in runs],
            "flower": args.flower_results,
            "wall_seconds": round(time.monotonic() - started, 1),
        }
        print(json.dumps(out))
        return 0
    job = job_settings(args)
    what = (
        job["dataset"]
        if job["model"] is None
        else f"{job['model']} on {job['dataset']}"
    )
    print(
        f"{what}, {args.workers} emulated sensors / Flower clients, seconds to "
        f"accuracy {target_of(args):g} (max {args.max_time:g} s), medians of "
        f"{args.seeds} seeds; Flower {flwr_version or '-'}; * = edgeps' best row; "
        f"{date}"
    )
    print(peer_table.table(comparisons))
    for line in peer_table.goal_lines(comparisons):
        print(line)
    for r in runs:
        if r.failed:
            print(f"FAILED {r.scenario} seed {r.seed} {r.side} {r.row}: {r.error}")
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\n{len(runs)} runs in {time.monotonic() - started:.0f} s wall, load {load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
