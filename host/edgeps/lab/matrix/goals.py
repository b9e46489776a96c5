"""`edgeps bench policies`: the policy comparison tables and DSP's goals, checked.

Goals (virtual time, 8 workers, medians over seeds): in ``mixed`` DSP reaches
the target accuracy at least 2x sooner than BSP and 1.2x sooner than the best
of SSP(1), SSP(3), SSP(5), with final accuracy no more than 0.5 points below
BSP's; in ``homogeneous`` DSP's time to target is within 10% of BSP's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from typing import Any

from edgeps.lab.matrix import scale_rows
from edgeps.sim.compare import PolicySummary, compare, split_policies
from edgeps.sim.types import SimConfig

POLICIES = "bsp,asp,ssp:1,ssp:3,ssp:5,dsp,kofn,dssp"
SCENARIOS = ("mixed", "homogeneous", "stragglers")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", default=None, help=f"default: {POLICIES}")
    parser.add_argument(
        "--scenarios", default=None, help="default: " + ",".join(SCENARIOS)
    )
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="first seed")
    parser.add_argument("--json", action="store_true")
    m = parser.add_argument_group("the matrix (--matrix)")
    m.add_argument(
        "--matrix",
        action="store_true",
        help="every policy x scenario x dataset x size x balancing, goals checked",
    )
    m.add_argument(
        "--conv",
        action="store_true",
        help="the conv matrix: mnist1d, basicmotions, mnist (LeNet-5); 8, 32, 64 "
        "workers; disturbed, stragglers, churn, mixed; balancing off; each "
        "dataset's own target and run length (the flags below still override)",
    )
    m.add_argument("--datasets", default=None, help="default: sensors,digits")
    m.add_argument("--sizes", default=None, help="worker counts (default: 8,64)")
    m.add_argument(
        "--balance", choices=("off", "on", "both"), default=None, help="default: both"
    )
    m.add_argument(
        "--balance-mode",
        choices=("policy", "eager", "warmup"),
        default="policy",
        help="balancing from a board's first push or its third; policy: eager "
        "for those that wait for whole rounds (bsp, kofn)",
    )
    m.add_argument(
        "--local-steps",
        default="1",
        metavar="LIST",
        help="local steps per push, a row per value: e.g. 1,8 (rows POLICY/hH)",
    )
    m.add_argument("--max-time", type=float, default=None, help="virtual s per run")
    m.add_argument("--jobs", type=int, default=None, help="processes (default 2)")
    scale_rows.configure(parser)


def _t(summaries: list[PolicySummary], policy: str) -> float:
    s = next((x for x in summaries if x.policy == policy), None)
    if s is None or s.time_to_target is None:
        return math.inf
    return s.time_to_target


def _acc(summaries: list[PolicySummary], policy: str) -> float:
    s = next((x for x in summaries if x.policy == policy), None)
    return math.nan if s is None else s.final_accuracy


def check_goals(results: dict[str, list[PolicySummary]]) -> list[dict[str, Any]]:
    """Each goal with its measured value, the requirement, and whether it holds."""
    goals: list[dict[str, Any]] = []
    mixed = results.get("mixed")
    if mixed is not None:
        dsp = _t(mixed, "dsp")
        best_ssp = min(_t(mixed, f"ssp:{s}") for s in (1, 3, 5))
        vs_bsp = _t(mixed, "bsp") / dsp if dsp > 0 else math.nan
        vs_ssp = best_ssp / dsp if dsp > 0 else math.nan
        gap = 100 * (_acc(mixed, "bsp") - _acc(mixed, "dsp"))
        goals += [
            {
                "goal": "mixed: BSP time / DSP time",
                "value": vs_bsp,
                "need": ">= 2.0",
                "ok": vs_bsp >= 2.0,
            },
            {
                "goal": "mixed: best SSP time / DSP time",
                "value": vs_ssp,
                "need": ">= 1.2",
                "ok": vs_ssp >= 1.2,
            },
            {
                "goal": "mixed: BSP - DSP final accuracy (points)",
                "value": gap,
                "need": "<= 0.5",
                "ok": gap <= 0.5,
            },
        ]
    homo = results.get("homogeneous")
    if homo is not None:
        ratio = _t(homo, "dsp") / _t(homo, "bsp")
        goals.append(
            {
                "goal": "homogeneous: DSP time / BSP time",
                "value": ratio,
                "need": "<= 1.1",
                "ok": ratio <= 1.1,
            }
        )
    return goals


def run(args: argparse.Namespace) -> int:
    from edgeps.observe.table import table
    from edgeps.sim.compare import summary_cells

    if args.matrix:
        from edgeps.lab.matrix.cli import run_matrix_command

        return run_matrix_command(args)
    try:
        policies = split_policies(args.policies or POLICIES)
        scenarios = [
            s.strip() for s in (args.scenarios or ",".join(SCENARIOS)).split(",")
        ]
        scenarios = [s for s in scenarios if s]
        base = SimConfig(n_workers=args.workers)
        results = {
            sc: compare(
                policies,
                dataclasses.replace(base, scenario=sc),
                args.seeds,
                first_seed=args.seed,
            )
            for sc in scenarios
        }
        at_scale = scale_rows.scale_rows(
            policies,
            scale_rows.sizes(args.scale_sizes),
            args.scale_scenario,
            args.scale_seeds,
            args.scale_max_time,
            args.seed,
        )
    except (ValueError, TypeError) as exc:
        print(f"edgeps bench policies: {exc}", file=sys.stderr)
        return 2
    goals = check_goals(results)
    if args.json:
        out = {
            "config": {
                **dataclasses.asdict(base),
                "seeds": args.seeds,
                "first_seed": args.seed,
            },
            "scenarios": {sc: [s.to_dict() for s in ss] for sc, ss in results.items()},
            "goals": goals,
            "scale": at_scale,
        }
        print(json.dumps(out, default=lambda x: None))
        return 0
    header = [
        "policy",
        "t_target_s",
        "reached",
        "final_acc",
        "updates/s",
        "idle",
        "max_stale",
    ]
    for sc, summaries in results.items():
        print(
            f"\n{sc}: {args.workers} workers, target accuracy "
            f"{base.target_accuracy:g}, medians over {args.seeds} seeds"
        )
        rows = [[s.policy, *summary_cells(s, base.max_time)] for s in summaries]
        print(table(header, rows))
    if goals:
        print()
        rows = [
            [g["goal"], f"{g['value']:.2f}", g["need"], "yes" if g["ok"] else "NO"]
            for g in goals
        ]
        print(table(["goal", "measured", "required", "met"], rows))
    scale_rows.print_rows(at_scale)
    return 0
