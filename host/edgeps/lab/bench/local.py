"""`edgeps bench local`: local rounds on a real broker, bytes, seconds and joules.

For each number of sensors, scenario, row and seed: a real `edgeps serve
--policy P [--local-steps H] [--compress UP --compress-down DOWN]` and
`edgeps emulate --json` on a private mosquitto on 127.0.0.1, run by the
real-broker policy bench's own code (`edgeps.lab.bench.policies_broker.
run_once`: a passive client times each run from the first HELLO to the MODEL
``done`` serve publishes at the target). Bytes and joules per board are what
emulate reports (`edgeps.emulate.usage`): the mean over sensors of the MQTT
payload bytes each sent and received, and the energy model of its bytes,
computing and waiting time at its link rate, up to the end of its run; the
bytes less what the broker carried on each sensor's topics after serve's
MODEL ``done`` (the final model, STOP, an UPDATE in flight), so they stop at
the target. Next to each cell: the simulator's seconds for the same policy,
H, scenario and codecs (`edgeps.lab.matrix.grid.run_matrix`, in-process, the
emulator's CPU charged to the host), one simulated run per broker run with
its seed and its sensors' join times, serve's admission rule and liveness
timeout and emulate's heartbeat period. Under the table: the goals, met or
not.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edgeps.emulate.common import EmulationConfig
from edgeps.lab.bench import policies_broker as pb
from edgeps.lab.bench.local_table import (
    LocalCell,
    LocalRun,
    Row,
    build_cells,
    failure_lines,
    goals,
    median_time,
    parse_row,
    parse_rows,
    run_from_dict,
    table,
)
from edgeps.lab.bench.policies_table import BrokerRun
from edgeps.lab.matrix import grid as matrix
from edgeps.netem.flags import add_link_flags
from edgeps.runtime.config import ServeConfig

SERVE_LIVENESS = ServeConfig.liveness_timeout  # s, serve's default
EMULATE_HEARTBEAT = EmulationConfig.heartbeat_ms / 1000  # s, emulate's default
ROWS = "dsp fedavg/h8 fedbuff:k=4/h8 dsp/h8 dsp/h8/int8/int8 fedbuff:k=4/h8/int8/int8"
SIZES = "8,64"
SCENARIOS = "stragglers,slowlinks"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rows",
        default=ROWS,
        help="POLICY[/hH][/UP[/DOWN]] rows, separated by spaces or ';' "
        f"(default: {ROWS!r})",
    )
    parser.add_argument("--workers", default=SIZES, help="sensors, comma-separated")
    parser.add_argument("--scenarios", default=SCENARIOS)
    parser.add_argument("--seeds", type=int, default=3, help="runs per cell (median)")
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--max-time", type=float, default=60.0, help="s per run")
    parser.add_argument(
        "--target-accuracy",
        type=float,
        default=None,
        help=f"default: the matrix's for {pb.DATASET}, "
        f"{matrix.DATASETS[pb.DATASET][1]:g}",
    )
    parser.add_argument("--board", default="esp32", choices=("esp32", "pi"))
    parser.add_argument(
        "--sleep-at-barrier",
        action="store_true",
        help="the energy model counts a board waiting for its release as asleep",
    )
    add_link_flags(parser)
    parser.add_argument("--serve-args", default="", help="more flags for every serve")
    parser.add_argument("--emulate-args", default="", help="more flags for emulate")
    parser.add_argument("--no-sim", action="store_true", help="skip the simulator")
    parser.add_argument(
        "--log",
        type=Path,
        metavar="FILE",
        help="append each run's record to FILE as one JSON line as it ends",
    )
    parser.add_argument(
        "--from-log",
        type=Path,
        action="append",
        metavar="FILE",
        help="run nothing: the table of the runs logged in FILE (repeatable), "
        "with the simulator's for the same cells",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def sizes_of(args: Any) -> list[int]:
    try:
        sizes = [int(x) for x in _split(args.workers)]
    except ValueError:
        raise ValueError(f"--workers: whole numbers, got {args.workers!r}") from None
    if not sizes or min(sizes) < 1:
        raise ValueError("--workers: at least one size, each >= 1")
    return sizes


def links_of(args: Any) -> dict[str, float]:
    """The --link-* flags given (they override the scenario's links), by field."""
    names = ("link_rate", "link_delay", "link_loss")
    return {k: float(v) for k in names if (v := getattr(args, k, None)) is not None}


def link_flags(links: dict[str, float]) -> list[str]:
    """Emulate's flags for ``links_of``: bits/s, seconds, a chance."""
    units = {"link_rate": "bit", "link_delay": "s", "link_loss": ""}
    return [x for k, v in links.items()
            for x in (f"--{k.replace('_', '-')}", f"{v:g}{units[k]}")]  # fmt: skip


def run_args(args: Any, row: Row, workers: int) -> argparse.Namespace:
    """What `policies_broker.run_once` reads, for one row at one size."""
    asleep = ["--sleep-at-barrier"] if args.sleep_at_barrier else []
    emulate = ["--board", args.board, *asleep, *link_flags(links_of(args))]
    return argparse.Namespace(
        workers=workers,
        max_time=args.max_time,
        target_accuracy=pb.target_of(args),
        serve_args=" ".join([*row.serve_flags(), args.serve_args]).strip(),
        emulate_args=" ".join([*emulate, args.emulate_args]).strip(),
    )


def per_board(path: Path) -> dict[str, Any]:
    """Emulate's per-board means from its JSON; {} when it printed none."""
    try:
        out = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    got = out.get("per_board") if isinstance(out, dict) else None
    return got if isinstance(got, dict) else {}


def run_cell_once(
    url: str, job: str, workers: int, scenario: str, row: Row, seed: int,
    args: Any, workdir: Path,
) -> LocalRun:  # fmt: skip
    """One serve + emulate run of a cell and seed on the broker at ``url``."""
    broker = BrokerRun(row.policy, scenario, False, seed)
    pb.run_once(url, job, broker, run_args(args, row, workers), workdir)
    run = LocalRun(workers, scenario, row.name, broker)
    usage = per_board(pb.emulate_out(workdir, job))
    run.bytes_up, run.bytes_down = usage.get("bytes_up"), usage.get("bytes_down")
    run.joules = usage.get("joules")
    if not broker.failed and run.bytes_up is None:
        broker.error = "emulate reported no per-board usage"
    return run


def sim_overrides(args: Any, row: Row, joins: list[float]) -> dict[str, Any]:
    """The simulator's config for a row: the bench's target, codecs, board, links,
    the emulator's CPU on the host, and the boards joining when the run's did."""
    from edgeps.sim.types import EMULATOR_CPU_US

    return {
        "target_accuracy": pb.target_of(args),
        "emulator_cpu_us": EMULATOR_CPU_US,
        "compress": row.compress,
        "compress_down": row.compress_down,
        "board": args.board,
        "sleep_at_barrier": args.sleep_at_barrier,
        "stop_at_target": True,  # as serve: nothing past it is read
        "join_times": tuple(joins),
        # as serve and emulate: a newcomer holds no barrier until its first
        # push; serve's liveness timeout, emulate's heartbeat period
        "admit_on_first_push": True,
        "liveness_timeout": SERVE_LIVENESS,
        "heartbeat_interval": EMULATE_HEARTBEAT,
        **links_of(args),
    }


def add_sim(cells: list[LocalCell], rows: list[Row], args: Any) -> None:
    """The simulator's medians for every cell: the same job in virtual time, one
    simulated run per broker run (its seed, its sensors' join times)."""
    by_name = {r.name: r for r in rows}
    for c in cells:
        row = by_name[c.row]
        runs = [(r.broker.seed, r.broker.joins) for r in c.ok]
        if not runs:  # no broker run to follow: the bench's seeds, all at 0
            runs = [(s, []) for s in range(args.seed, args.seed + args.seeds)]
        times, ups, joules = [], [], []
        for seed, joins in runs:
            (result,) = matrix.run_matrix(
                [matrix.Cell(pb.DATASET, c.workers, c.scenario, False)],
                [row.policy],
                seeds=1,
                first_seed=seed,
                max_time=max(args.max_time, matrix.MAX_TIME),
                local_steps=(row.local_steps,),
                overrides=sim_overrides(args, row, joins),
                jobs=1,
            )
            (entry,) = result.entries.values()
            times += entry.times
            ups += entry.bytes_up
            joules += entry.joules
        c.sim_time = median_time(times)
        c.sim_bytes_up = statistics.median(ups) if ups else None
        c.sim_joules = statistics.median(joules) if joules else None


def measure(
    args: Any, url: str | None = None, progress: Any = None
) -> tuple[list[LocalCell], dict[str, Any]]:
    """Every run on one mosquitto (a private one unless ``url``); cells and info."""
    from contextlib import nullcontext

    from edgeps.transport.broker import start_mosquitto

    rows, sizes, scenarios = (
        parse_rows(args.rows),
        sizes_of(args),
        _split(args.scenarios),
    )
    keys = [(n, s, r.name) for n in sizes for s in scenarios for r in rows]
    runs: list[LocalRun] = []
    started = time.monotonic()
    own = start_mosquitto() if url is None else nullcontext(None)
    with tempfile.TemporaryDirectory(prefix="edgeps-local-") as tmp, own as b:
        at = b.url if b is not None else str(url)
        k = 0
        for n in sizes:
            for scenario in scenarios:
                for seed in range(args.seed, args.seed + args.seeds):
                    for row in rows:
                        k += 1
                        run = run_cell_once(at, f"lr{k}", n, scenario, row, seed,
                                            args, Path(tmp))  # fmt: skip
                        runs.append(run)
                        if args.log is not None:
                            with args.log.open("a") as f:
                                f.write(json.dumps(run.to_dict()) + "\n")
                        if progress is not None:
                            progress(run)
    cells = build_cells(keys, runs)
    if not args.no_sim:
        add_sim(cells, rows, args)
    info = {
        "wall_seconds": round(time.monotonic() - started, 1),
        "runs": [r.to_dict() for r in runs],
    }
    return cells, info


def from_logs(args: Any) -> tuple[list[LocalCell], dict[str, Any]]:
    """The cells of logged runs (in the order they ran), with the simulator's."""
    runs = []
    for path in args.from_log:
        for line in path.read_text().splitlines():
            if line.strip():
                runs.append(run_from_dict(json.loads(line)))
    if not runs:
        raise ValueError("the logs hold no run")
    keys = list(dict.fromkeys((r.workers, r.scenario, r.row) for r in runs))
    cells = build_cells(keys, runs)
    rows = [parse_row(name) for name in dict.fromkeys(r.row for r in runs)]
    args.seeds = max(len(c.runs) for c in cells)
    args.workers = ",".join(str(n) for n in dict.fromkeys(r.workers for r in runs))
    args.scenarios = ",".join(dict.fromkeys(r.scenario for r in runs))
    args.rows = " ".join(r.name for r in rows)
    if not args.no_sim:
        add_sim(cells, rows, args)
    return cells, {"runs": [r.to_dict() for r in runs]}


def _check(args: Any) -> None:
    from edgeps.codecs import parse_compress
    from edgeps.kernels import params_codec
    from edgeps.policy import parse_policy
    from edgeps.workloads.scenarios import SCENARIOS as KNOWN

    for r in parse_rows(args.rows):
        parse_policy(r.policy)
        parse_compress(r.compress)
        params_codec.parse_code(r.compress_down)
    sizes_of(args)
    for s in _split(args.scenarios) or ["(none)"]:
        if s not in KNOWN:
            raise ValueError(f"unknown scenario {s!r}; known: {', '.join(KNOWN)}")
    if args.seeds < 1 or args.max_time <= 0:
        raise ValueError("--seeds must be >= 1, --max-time > 0")


def _note(run: LocalRun) -> None:
    b = run.broker
    t = "-" if b.time_to_target is None else f"{b.time_to_target:.1f} s"
    what = f"FAILED: {b.error}" if b.failed else f"{t}, acc {b.final_accuracy}"
    print(f"  {run.workers} {run.scenario} seed {b.seed} {run.row}: {what}",
          file=sys.stderr, flush=True)  # fmt: skip


def run(args: argparse.Namespace) -> int:
    try:
        if args.from_log:
            cells, info = from_logs(args)
        else:
            _check(args)
            cells, info = measure(args, progress=_note)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"edgeps bench local: {exc}", file=sys.stderr)
        return 2
    checked = goals(cells, args.max_time, with_sim=not args.no_sim)
    if args.json:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        config.update(dataset=pb.DATASET, target_accuracy=pb.target_of(args))
        out = {
            "config": config,
            "cells": [c.to_dict() for c in cells],
            "goals": [{"name": g.name, "met": g.met, "text": g.text} for g in checked],
            **info,
        }
        print(json.dumps(out, default=str))
        return 0
    print(
        f"{pb.DATASET} on a real mosquitto, emulated sensors ({args.board}"
        f"{', asleep at the barrier' if args.sleep_at_barrier else ''}): per board "
        f"payload bytes up and down and joules (emulate's), seconds from the first "
        f"HELLO to accuracy {pb.target_of(args):g} (max {args.max_time:g} s), "
        f"final accuracy; medians of {args.seeds} seeds; runs = reached/ok; "
        f"sim s = the simulator's for the same cell"
    )
    print(table(cells, with_sim=not args.no_sim))
    for g in checked:
        print(g.line())
    for line in failure_lines(cells):
        print(line)
    wall = info.get("wall_seconds")
    print(
        f"\n{len(info['runs'])} runs"
        + ("" if wall is None else f" in {wall:.0f} s wall")
    )
    return 0
