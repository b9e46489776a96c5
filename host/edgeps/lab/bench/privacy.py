"""`edgeps bench privacy`: what differential privacy costs in the simulator.

For each worker count and noise multiplier sigma, one simulated job (the
job defaults, policy dsp, the mixed scenario) with ``--dp central`` (or
``--mode local``) at clip C: the time to the target accuracy, the final
accuracy, the updates applied and the epsilon spent at delta, over every
applied update and per disjoint shard (``edgeps.observe.privacy``). A row
"off" per worker count is the same job without DP. Virtual time: seconds of
the simulated job, not of this machine.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from edgeps.core.defaults import JOB
from edgeps.observe.table import table
from edgeps.sim.types import SimConfig

DEFAULT_WORKERS = "8,64"
DEFAULT_NOISE = "0,0.5,1,2"


def _numbers(text: str, kind: type, flag: str) -> list[Any]:
    try:
        values = [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag} takes a comma-separated list, got {text!r}") from None
    if not values:
        raise ValueError(f"{flag} is empty")
    return values


def configure(parser: argparse.ArgumentParser) -> None:
    d = SimConfig()
    parser.add_argument(
        "--workers", default=DEFAULT_WORKERS, help=f"counts (default {DEFAULT_WORKERS})"
    )
    parser.add_argument(
        "--noise",
        default=DEFAULT_NOISE,
        help=f"noise multipliers sigma (default {DEFAULT_NOISE})",
    )
    parser.add_argument(
        "--mode", choices=("central", "local"), default="central", help="--dp mode"
    )
    parser.add_argument("--dp-clip", type=float, default=JOB.dp_clip, metavar="C")
    parser.add_argument("--dp-delta", type=float, default=JOB.dp_delta)
    parser.add_argument("--policy", default="dsp")
    parser.add_argument("--scenario", default=d.scenario)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target-accuracy", type=float, default=d.target_accuracy)
    parser.add_argument(
        "--max-time", type=float, default=d.max_time, help="virtual seconds"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One dict per (workers, sigma), with an "off" row first per worker count."""
    from edgeps.sim.simulator import simulate

    out: list[dict[str, Any]] = []
    workers = _numbers(args.workers, int, "--workers")
    noises = _numbers(args.noise, float, "--noise")
    for n in workers:
        for sigma in [None, *noises]:
            dp = {} if sigma is None else {"dp": args.mode, "dp_noise": sigma}
            cfg = SimConfig(
                policy=args.policy,
                scenario=args.scenario,
                n_workers=n,
                seed=args.seed,
                target_accuracy=args.target_accuracy,
                max_time=args.max_time,
                dp_clip=args.dp_clip,
                dp_delta=args.dp_delta,
                **dp,
            )
            r = simulate(cfg)
            p = r.privacy
            out.append(
                {
                    "workers": n,
                    "dp": "off" if sigma is None else args.mode,
                    "sigma": sigma,
                    "clip": None if sigma is None else args.dp_clip,
                    "delta": None if sigma is None else args.dp_delta,
                    "epsilon": p.get("epsilon"),
                    "epsilon_per_shard": p.get("epsilon_per_shard"),
                    "updates": r.applied,
                    "time_to_target": r.time_to_target,
                    "final_accuracy": r.final_accuracy,
                }
            )
    return out


def _eps(value: float | None, dp: str) -> str:
    if dp == "off":
        return "-"
    if value is None or not math.isfinite(value):
        return "inf"
    return f"{value:.3g}"


def render(data: list[dict[str, Any]], args: argparse.Namespace) -> str:
    header = ["workers", "dp", "sigma", "epsilon", "eps/shard", "updates",
              "t_target_s", "final_acc"]  # fmt: skip
    body = [
        [
            str(r["workers"]),
            r["dp"],
            "-" if r["sigma"] is None else f"{r['sigma']:g}",
            _eps(r["epsilon"], r["dp"]),
            _eps(r["epsilon_per_shard"], r["dp"]),
            str(r["updates"]),
            "-" if r["time_to_target"] is None else f"{r['time_to_target']:.1f}",
            f"{r['final_accuracy']:.3f}",
        ]
        for r in data
    ]
    head = (
        f"policy {args.policy}, scenario {args.scenario}, clip {args.dp_clip:g}, "
        f"delta {args.dp_delta:g}, target {args.target_accuracy:g}, "
        f"{args.max_time:g} s virtual, seed {args.seed}; '-' = target not reached"
    )
    return head + "\n" + table(header, body)


def run(args: argparse.Namespace) -> int:
    from edgeps.observe.metrics import dumps
    from edgeps.observe.privacy import require_accountant

    try:
        require_accountant()
        data = rows(args)
    except (ValueError, RuntimeError) as exc:
        print(f"edgeps bench privacy: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(dumps({"config": vars_of(args), "rows": data}))
    else:
        print(render(data, args))
    return 0


def vars_of(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("workers", "noise", "mode", "dp_clip", "dp_delta", "policy", "scenario",
            "seed", "target_accuracy", "max_time")  # fmt: skip
    return json.loads(json.dumps({k: getattr(args, k) for k in keys}))
