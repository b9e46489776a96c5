"""`edgeps bench policies --matrix`: run the matrix, print it (or JSON), check goals."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from typing import Any

from edgeps.lab.matrix import conv
from edgeps.lab.matrix import grid as matrix
from edgeps.lab.matrix.readings import counts_table, reading_counts
from edgeps.lab.matrix.report import (
    DSP_ACC_POINTS,
    DSP_TIME,
    check_goals,
    table,
    usage_table,
)
from edgeps.policy import parse_policy
from edgeps.sim.compare import split_policies


def _list(text: str | None, default: tuple[Any, ...]) -> list[str]:
    if text is None:
        return [str(x) for x in default]
    return [x.strip() for x in text.split(",") if x.strip()]


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def _job(dataset: str) -> Any:
    job = conv.JOBS.get(dataset)
    return dataclasses.asdict(job) if job else matrix.DATASETS[dataset]


def _target(dataset: str) -> str:
    job = conv.JOBS.get(dataset)
    if job is not None:
        return (
            f"{dataset} {job.partition} to {job.target:g} in "
            f"{job.max_time:g} s at 8 workers, {job.optimizer} lr {job.lr:g}"
        )
    partition, target = matrix.DATASETS[dataset]
    return f"{dataset} {partition} to {target:g}"


_EAGER = {"policy": None, "eager": True, "warmup": False}


def _preset(args: argparse.Namespace) -> dict[str, Any]:
    """The matrix's defaults, or the conv matrix's with --conv."""
    if getattr(args, "conv", False):
        return {
            "policies": conv.POLICIES,
            "datasets": conv.DATASETS,
            "sizes": conv.SIZES,
            "scenarios": conv.SCENARIOS,
            "balance": "off",
            "max_time": None,  # each dataset's own
        }
    return {
        "policies": matrix.POLICIES,
        "datasets": tuple(matrix.DATASETS),
        "sizes": matrix.SIZES,
        "scenarios": matrix.SCENARIOS,
        "balance": "both",
        "max_time": matrix.MAX_TIME,
    }


def run_matrix_command(args: argparse.Namespace) -> int:
    pre = _preset(args)
    try:
        policies = (
            split_policies(args.policies) if args.policies else list(pre["policies"])
        )
        for p in policies:
            parse_policy(p)
        balance = {"off": (False,), "on": (True,), "both": (False, True)}[
            args.balance or pre["balance"]
        ]
        grid = matrix.cells(
            _list(args.datasets, pre["datasets"]),
            [int(n) for n in _list(args.sizes, pre["sizes"])],
            _list(args.scenarios, pre["scenarios"]),
            balance,
        )
        # a conv dataset keeps its own run length unless --max-time is given
        own = any(c.dataset in conv.JOBS for c in grid)
        max_time = args.max_time or (None if own else pre["max_time"])
        local_steps = [int(h) for h in _list(args.local_steps, matrix.LOCAL_STEPS)]
        if any(h < 1 for h in local_steps):
            raise ValueError("--local-steps takes integers >= 1")
        started = time.monotonic()
        results = matrix.run_matrix(
            grid,
            policies,
            seeds=args.seeds,
            first_seed=args.seed,
            max_time=max_time,
            jobs=args.jobs,
            balance_eager=_EAGER[args.balance_mode],
            local_steps=local_steps,
        )
        wall = time.monotonic() - started
    except (ValueError, TypeError) as exc:
        print(f"edgeps bench policies: {exc}", file=sys.stderr)
        return 2
    goals = check_goals(results)
    if args.json:
        out = {
            "config": {
                "policies": policies,
                "seeds": args.seeds,
                "first_seed": args.seed,
                "max_time": max_time,
                "balance_mode": args.balance_mode,
                "local_steps": local_steps,
                "datasets": {d: _job(d) for d in sorted({c.dataset for c in grid})},
                "wall_seconds": wall,
            },
            "cells": [r.to_dict() for r in results],
            "goals": goals,
            "dsp_readings": [c.to_dict() for c in reading_counts(results)],
        }
        print(json.dumps(_json_safe(out)))
        return 0
    used = sorted({c.dataset for c in grid})
    targets = ", ".join(_target(d) for d in used)
    ends = f"{max_time:g} s" if max_time else "the run's end"
    print(
        f"virtual seconds to the target accuracy ({targets}) and final accuracy at "
        f"{ends}; medians over {args.seeds} seeds; * = best in the cell"
        f" (digits past {matrix.LARGE} workers: labelmix:0.3)"
    )
    print(table(results, max_time or 0.0))
    print("\nbytes up per board (kB) / joules per board (ESP32 model) to the target")
    print(usage_table(results))
    print()
    rows = [
        [g["goal"], f"{g['value']:.2f}", g["need"], "yes" if g["ok"] else "NO"]
        for g in goals
    ]
    from edgeps.observe.table import table as plain_table

    print(plain_table(["goal", "measured", "required", "met"], rows))
    counts = reading_counts(results)
    if counts:
        print(
            "\neach DSP row against the rows that are not DSP: cells within "
            f"{DSP_TIME}x of the fastest time, strictly fastest, and within "
            f"{DSP_ACC_POINTS} points of the best accuracy"
        )
        print(counts_table(counts))
    print(
        f"\n{len(grid)} cells x {len(policies)} policies x {args.seeds} seeds "
        f"in {wall:.0f} s wall"
    )
    return 0
