"""What `edgeps bench policies-broker` prints: the checks, progress, table and JSON.

Also ``--join``: slices measured apart (each under its own lock, each its own
``--json``) read back as one table, their runs unchanged, the simulator's
cells computed once for the joined grid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from edgeps.lab.bench import policies_broker as pb
from edgeps.lab.bench.policies_table import (
    BrokerRun,
    Row,
    agreement_line,
    build_rows,
    failure_lines,
    table,
)
from edgeps.lab.matrix import grid as matrix


def check(args: Any) -> None:
    """Every flag a run needs, before any process starts."""
    from edgeps.lab.bench import policies_conv as convjob
    from edgeps.policy import parse_policy
    from edgeps.workloads.scenarios import SCENARIOS as KNOWN

    for p in pb.policy_list(args.policies):
        parse_policy(p)
    for s in pb._split(args.scenarios):
        if s not in KNOWN:
            raise ValueError(f"unknown scenario {s!r}; known: {', '.join(KNOWN)}")
    datasets = pb._split(args.dataset)
    for d in datasets:
        if d not in matrix.DATASETS and not convjob.is_conv(d):
            known = [*matrix.DATASETS, *convjob.TIME_SCALE]
            raise ValueError(f"unknown dataset {d!r}; known: {', '.join(known)}")
        if convjob.is_conv(d):
            k = convjob.time_scale(d, args.time_scale)
            for s in pb._split(args.scenarios):
                convjob.scaled_scenario(s, k)
    if (
        not pb.policy_list(args.policies)
        or not pb._split(args.scenarios)
        or not datasets
    ):
        raise ValueError("need at least one policy, one scenario and one dataset")
    if args.seeds < 1 or args.workers < 1 or (args.max_time or 1) <= 0:
        raise ValueError("--seeds and --workers must be >= 1, --max-time > 0")


def note(run: BrokerRun) -> None:
    bal = "on" if run.balance else "off"
    t = "-" if run.time_to_target is None else f"{run.time_to_target:.1f} s"
    what = f"FAILED: {run.error}" if run.failed else f"{t}, {run.updates} updates"
    where = "" if run.dataset == pb.DATASET else f"{run.dataset} "
    print(f"  {where}{run.scenario} bal {bal} seed {run.seed} {run.policy}: {what}",
          file=sys.stderr, flush=True)  # fmt: skip


def join(args: Any) -> tuple[list[Row], dict[str, Any]]:
    """The rows of earlier slices' --json outputs, with the simulator's cells."""
    runs: list[BrokerRun] = []
    cells: dict[matrix.Cell, None] = {}
    policies: dict[str, None] = {}
    wall = 0.0
    for name in pb._split(args.join):
        try:
            data = json.loads(Path(name).read_text())
            for r in data["rows"]:
                cell = matrix.Cell(r["dataset"], r["workers"], r["scenario"],
                                   r["balance"])  # fmt: skip
                cells[cell] = None
                policies.update((c["policy"], None) for c in r["cells"])
            runs += [BrokerRun(**r) for r in data["runs"]]
            wall += float(data.get("wall_seconds", 0.0))
            workers = {c.workers for c in cells}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            msg = f"--join {name}: not a policies-broker --json ({exc})"
            raise ValueError(msg) from None
    if len(workers) != 1:
        raise ValueError("--join: the slices must have the same --workers")
    grid = list(cells)
    args.policies = ",".join(policies)
    args.workers = workers.pop()
    sim = pb.sim_cells(grid, list(policies), args) if pb.with_sim(args) else []
    info = {"wall_seconds": round(wall, 1), "runs": [r.__dict__ for r in runs]}
    return build_rows(grid, runs, sim_cells=sim), info


def _seeds(runs: list[dict[str, Any]]) -> int:
    return len({r["seed"] for r in runs})


def report(args: argparse.Namespace) -> int:
    """Measure (or join) and print; 2 after a one-line message on bad input."""
    try:
        if args.join:
            rows, info = join(args)
        else:
            check(args)
            rows, info = pb.measure(args, progress=note)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"edgeps bench policies-broker: {exc}", file=sys.stderr)
        return 2
    policies = pb.policy_list(args.policies)
    datasets = list(dict.fromkeys(r.cell.dataset for r in rows))
    sims = any(r.sim_cell is not None for r in rows)
    if args.json:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        config.update(
            dataset=",".join(datasets),
            target_accuracy={d: pb.target_of(args, d) for d in datasets},
            max_time={d: pb.max_time_of(args, d) for d in datasets},
            sim=pb.with_sim(args),
        )
        out = {"config": config, "rows": [r.to_dict(policies) for r in rows], **info}
        if sims:
            out["agreement"] = agreement_line(rows)
        print(json.dumps(out, default=lambda x: None))
        return 0
    targets = ", ".join(
        f"{d} {pb.target_of(args, d):g} (max {pb.max_time_of(args, d):g} s)"
        for d in datasets
    )
    print(
        f"{args.workers} emulated sensors on a real mosquitto: wall seconds from "
        f"the first HELLO to the target accuracy, final accuracy ({targets}), "
        f"medians of {_seeds(info['runs'])} real seeds, * = best in the row; "
        f"sim s = the simulator's virtual seconds for the same cell (medians of "
        f"{args.seeds} seeds)"
    )
    print(table(rows, policies, with_sim=pb.with_sim(args)))
    for line in failure_lines(rows):
        print(line)
    if sims:
        print(agreement_line(rows))
    print(f"\n{len(info['runs'])} runs in {info['wall_seconds']:.0f} s wall")
    return 0
