"""`edgeps simulate`: one policy, or a comparison table, in virtual time."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

from edgeps.netem.flags import add_link_flags
from edgeps.runtime.privacy_flags import add_dp_flags
from edgeps.sim.types import EMULATOR_CPU_US, SimConfig

DEFAULT_COMPARE = "bsp,asp,ssp:1,ssp:3,ssp:5,dsp,kofn:auto,dssp"


def configure(parser: argparse.ArgumentParser) -> None:
    d = SimConfig()
    parser.add_argument("--policy", default=d.policy, help="e.g. bsp, ssp:3, dsp:w=2")
    parser.add_argument(
        "--compare",
        metavar="LIST",
        help=f"comma-separated policies to compare, e.g. {DEFAULT_COMPARE}",
    )
    parser.add_argument(
        "--scenario", default=d.scenario, help="see edgeps.workloads.scenarios"
    )
    parser.add_argument("--workers", type=int, default=d.n_workers)
    parser.add_argument("--seed", type=int, default=d.seed, help="first seed")
    parser.add_argument(
        "--seeds", type=int, default=3, help="seeds per policy (compare)"
    )
    parser.add_argument("--dataset", default=d.dataset)
    parser.add_argument("--model", default=None, help="model spec, e.g. mlp:33-32-6")
    parser.add_argument("--partition", default=d.partition, help="iid | dirichlet:A")
    parser.add_argument(
        "--batch", dest="batch_size", type=int, default=d.batch_size, help="minibatch"
    )
    parser.add_argument("--optimizer", default=d.optimizer)
    parser.add_argument("--lr", type=float, default=d.lr)
    parser.add_argument(
        "--lr-workers",
        type=int,
        default=d.lr_workers,
        metavar="R",
        help="past R live workers each push steps by lr x R / workers; 0: plain lr",
    )
    parser.add_argument(
        "--norm-guard",
        type=float,
        default=d.norm_guard,
        metavar="K",
        help="refuse pushes above K x the recent median norm, as serve; 0: off",
    )
    parser.add_argument(
        "--staleness-aware",
        choices=("auto", "on", "off"),
        default="auto",
        help="lr / (staleness + 1); auto: each policy's default",
    )
    parser.add_argument(
        "--balance",
        action=argparse.BooleanOptionalAction,
        default=d.balance,
        help="the PS assigns each board its batch from the monitor",
    )
    parser.add_argument(
        "--balance-eager",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="with --balance: assign from a board's first push (on) or its "
        "third (off); default: eager for policies that wait for whole rounds "
        "(bsp, kofn), not for asp, dsp, ssp and dssp",
    )
    local = parser.add_argument_group("local rounds (a push is a delta)")
    local.add_argument(
        "--local-steps",
        type=int,
        default=d.local_steps,
        metavar="H",
        help="SGD steps a board takes at --lr between pushes; H > 1 pushes the delta",
    )
    local.add_argument(
        "--local-epochs",
        type=float,
        default=d.local_epochs,
        metavar="E",
        help="instead: E passes over the board's shard per push (0: off)",
    )
    local.add_argument(
        "--local-time",
        type=float,
        default=d.local_time,
        metavar="S",
        help="instead: local steps until S seconds of compute (0: off)",
    )
    local.add_argument(
        "--server-opt",
        choices=("sgd", "momentum", "adam"),
        default=d.server_opt,
        help="the optimizer the PS applies deltas with (FedOpt)",
    )
    local.add_argument(
        "--server-lr",
        type=float,
        default=d.server_lr,
        help="the step the PS applies deltas with",
    )
    energy = parser.add_argument_group("energy (edgeps.workloads.energy)")
    energy.add_argument(
        "--board", choices=("esp32", "pi"), default=d.board, help="power model"
    )
    energy.add_argument(
        "--sleep-at-barrier",
        action="store_true",
        help="a board held at the barrier sleeps (light sleep) until released",
    )
    parser.add_argument("--target-accuracy", type=float, default=d.target_accuracy)
    parser.add_argument("--max-time", type=float, default=d.max_time, help="seconds")
    parser.add_argument(
        "--eval-interval",
        type=float,
        default=d.eval_interval,
        metavar="S",
        help="virtual seconds between evaluations of the model on the test set",
    )
    add_link_flags(parser)
    parser.add_argument(
        "--compress", default=d.compress, help="UPDATE code: f32, f16, int8, topk:F"
    )
    parser.add_argument(
        "--compress-down", default=d.compress_down, help="PARAMS code: f32, f16, int8"
    )
    parser.add_argument(
        "--emulated",
        action="store_true",
        help="predict `edgeps emulate` on this machine: the sensors' CPU is the "
        "host's too (default: boards compute on their own CPUs)",
    )
    parser.add_argument(
        "--compute-time",
        type=float,
        default=None,
        metavar="S",
        help="every board's base iteration time in seconds, before the model's "
        "FLOPs scale it (as `edgeps emulate --compute-time`; default: the "
        "scenario's)",
    )
    parser.add_argument(
        "--host-cores",
        type=float,
        default=d.host_cores,
        help="cores serve, the broker (and an emulator) share",
    )
    add_dp_flags(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead")
    parser.add_argument("--plot", metavar="FILE", help="also draw it: .png, .svg")


def _config(args: argparse.Namespace) -> SimConfig:
    aware = {"auto": None, "on": True, "off": False}[args.staleness_aware]
    return SimConfig(
        policy=args.policy,
        scenario=args.scenario,
        n_workers=args.workers,
        seed=args.seed,
        dataset=args.dataset,
        model=args.model,
        partition=args.partition,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        lr=args.lr,
        lr_workers=args.lr_workers,
        norm_guard=args.norm_guard,
        staleness_aware=aware,
        balance=args.balance,
        balance_eager=args.balance_eager,
        target_accuracy=args.target_accuracy,
        max_time=args.max_time,
        eval_interval=args.eval_interval,
        link_rate=args.link_rate,
        link_delay=args.link_delay,
        link_loss=args.link_loss,
        compress=args.compress,
        compress_down=args.compress_down,
        emulator_cpu_us=EMULATOR_CPU_US if args.emulated else 0.0,
        host_cores=args.host_cores,
        compute_time=args.compute_time,
        local_steps=args.local_steps,
        local_epochs=args.local_epochs,
        local_time=args.local_time,
        server_opt=args.server_opt,
        server_lr=args.server_lr,
        board=args.board,
        sleep_at_barrier=args.sleep_at_barrier,
        dp=args.dp,
        dp_clip=args.dp_clip,
        dp_noise=args.dp_noise,
        dp_delta=args.dp_delta,
        dp_epsilon_budget=args.dp_epsilon_budget,
    )


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def run(args: argparse.Namespace) -> int:
    from edgeps.commands.flag_ranges import BATCH, LR, check_flag, workers
    from edgeps.netem.units import format_rate
    from edgeps.observe.table import table
    from edgeps.sim.compare import (
        compare,
        fmt_ratio,
        fmt_time,
        speedup,
        split_policies,
        summarize,
        summary_cells,
    )
    from edgeps.sim.simulator import simulate

    try:
        check_flag("--workers", args.workers, workers(1_000_000))
        check_flag("--lr", args.lr, LR)
        check_flag("--batch", args.batch_size, BATCH)
        cfg = _config(args)
        policies = split_policies(args.compare) if args.compare else None
        if cfg.dp != "off":
            from edgeps.observe.privacy import require_accountant

            require_accountant()  # the install hint before any simulation
        if args.plot:
            from edgeps.observe.plot import check_output, require_matplotlib

            check_output(args.plot)  # before minutes of simulation, not after
            require_matplotlib()
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"edgeps simulate: error: {exc}", file=sys.stderr)
        return 2
    try:
        if policies is None:
            result = simulate(cfg)
            summaries = None
        else:
            summaries = compare(policies, cfg, args.seeds, first_seed=args.seed)
    except (ValueError, TypeError) as exc:
        print(f"edgeps simulate: error: {exc}", file=sys.stderr)
        return 2
    head = (
        f"scenario {cfg.scenario}, {cfg.n_workers} workers, dataset {cfg.dataset}, "
        f"target accuracy {cfg.target_accuracy:g}, {cfg.max_time:g} s virtual"
    )
    if cfg.link_rate is not None or cfg.link_delay is not None:
        rate = format_rate(cfg.link_rate) if cfg.link_rate else "unlimited"
        delay = "scenario's" if cfg.link_delay is None else f"{cfg.link_delay:g} s"
        head += f", links {rate}, {delay} delay"
    if cfg.compress != "f32":
        head += f", updates {cfg.compress}"
    if cfg.compress_down != "f32":
        head += f", releases {cfg.compress_down}"
    if cfg.local_steps > 1 or cfg.local_epochs > 0 or cfg.local_time > 0:
        head += f", local steps {cfg.local_steps}" if cfg.local_steps > 1 else ""
        head += f", local epochs {cfg.local_epochs:g}" if cfg.local_epochs else ""
        head += f", local time {cfg.local_time:g} s" if cfg.local_time else ""
        head += f", server {cfg.server_opt} lr {cfg.server_lr:g}"
    if cfg.dp != "off":
        head += f", dp {cfg.dp} clip {cfg.dp_clip:g} noise {cfg.dp_noise:g}"
    if summaries is None:
        if args.plot and draw([summarize(cfg.policy, [result])], cfg, args.plot):
            return 2
        if args.json:
            print(json.dumps(_json_safe({"config": vars_of(cfg), **result.to_dict()})))
            return 0
        print(f"{head}, seed {cfg.seed}")
        header = ["policy", "t_target_s", "final_acc", "updates/s", "idle", "max_stale",
                  "up_B/board", "down_B/board", f"J/board ({cfg.board})"]  # fmt: skip
        row = [
            result.policy,
            fmt_time(result.time_to_target, cfg.max_time),
            f"{result.final_accuracy:.4f}",
            f"{result.updates_per_s:.1f}",
            f"{result.idle_fraction:.2f}",
            str(result.max_staleness),
            f"{result.bytes_up_per_board:.0f}",
            f"{result.bytes_down_per_board:.0f}",
            f"{result.joules_per_board:.2f}",
        ]
        print(table(header, [row]))
        step = max(1, len(result.trace) // 8)
        marks = result.trace[::step]
        if marks[-1] != result.trace[-1]:
            marks.append(result.trace[-1])
        print("accuracy: " + "  ".join(f"{t:g}s {a:.3f}" for t, a in marks))
        if result.privacy:
            from edgeps.observe.privacy import privacy_line

            print(privacy_line(result.privacy) + f"; stop: {result.stop_reason}")
        return 0
    if args.plot and draw(summaries, cfg, args.plot):
        return 2
    ref = speedup(summaries, "bsp")
    if args.json:
        out = {
            "config": vars_of(cfg),
            "seeds": args.seeds,
            "policies": [
                {**s.to_dict(with_runs=True), "speedup_vs_bsp": ref[s.policy]}
                for s in summaries
            ],
        }
        print(json.dumps(_json_safe(out)))
        return 0
    print(f"{head}; medians over {args.seeds} seeds from seed {cfg.seed}")
    header = [
        "policy",
        "t_target_s",
        "vs_bsp",
        "reached",
        "final_acc",
        "updates/s",
        "idle",
        "max_stale",
        "up_B/board",
        "down_B/board",
        f"J/board ({cfg.board})",
    ]
    rows = []
    for s in summaries:
        cells = summary_cells(s, cfg.max_time)
        usage = [
            f"{s.bytes_up_per_board:.0f}",
            f"{s.bytes_down_per_board:.0f}",
            f"{s.joules_per_board:.2f}",
        ]
        rows.append([s.policy, cells[0], fmt_ratio(ref[s.policy]), *cells[1:], *usage])
    print(table(header, rows))
    return 0


def draw(summaries: list[Any], cfg: SimConfig, path: str) -> int:
    """Write the comparison figure; nonzero (after a message) if it cannot."""
    from edgeps.observe.plot import PlotUnavailable, compare_figure, save

    title = f"scenario {cfg.scenario}, {cfg.n_workers} workers, {cfg.dataset}"
    try:
        save(compare_figure(summaries, max_time=cfg.max_time, title=title), path)
    except (PlotUnavailable, ValueError, FileNotFoundError) as exc:
        print(f"edgeps simulate: error: {exc}", file=sys.stderr)
        return 2
    print(f"edgeps simulate: comparison drawn to {path}", file=sys.stderr)
    return 0


def vars_of(cfg: SimConfig) -> dict[str, Any]:
    """The config as a plain dict, for JSON output."""
    import dataclasses

    return dataclasses.asdict(cfg)
