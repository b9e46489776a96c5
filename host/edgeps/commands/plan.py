"""`edgeps plan`: what a deployment of N sensors needs, tier by tier.

    edgeps plan --sensors 100000 --model mlp:64-32-10 --rate 1/s --link 250kbit
                [--relays K] [--compress f32|f16|int8|topk:F] [--calibrate] [--json]

Prints messages/s and bytes/s at each tier (sensor links, site brokers and
relays, the central broker, the host), the CPU each needs from per-update
costs measured on this machine (``--calibrate`` measures and stores them;
without it the stored ones are used, else defaults), and how many relays,
brokers and hosts the load needs. The model and its assumptions (message
sizes from the wire, the PS analysis of Alqahtani and Demirbas 2019 and
where MQTT's fan-out differs) are in ``edgeps.lab.plan.capacity``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edgeps.netem.flags import _flag_type
from edgeps.netem.units import parse_rate


def configure(parser: argparse.ArgumentParser) -> None:
    from edgeps.lab.plan.capacity import BOARD_CHUNK, HEARTBEAT_S, parse_per_second

    parser.add_argument("--sensors", type=int, required=True, help="sensor boards")
    parser.add_argument("--model", required=True, help="model spec, e.g. mlp:64-32-10")
    parser.add_argument(
        "--rate",
        type=_flag_type(parse_per_second),
        default=1.0,
        help="updates per sensor: 1/s, 2/min, 1/10s (default 1/s)",
    )
    parser.add_argument(
        "--link",
        type=_flag_type(parse_rate),
        default=250_000.0,
        help="each sensor's link, each way: 250kbit, 1mbit (default 250kbit)",
    )
    parser.add_argument("--relays", type=int, default=0, help="site relays (0: none)")
    parser.add_argument(
        "--fan-in",
        type=int,
        default=None,
        help="gradients a relay folds per upstream push (default: all its boards)",
    )
    parser.add_argument(
        "--compress",
        default="f32",
        help="UPDATE encoding: f32, f16, int8, topk:F (default f32)",
    )
    parser.add_argument(
        "--chunk", type=int, default=BOARD_CHUNK, help="board max_chunk bytes"
    )
    parser.add_argument(
        "--heartbeat", type=float, default=HEARTBEAT_S, help="seconds between beats"
    )
    parser.add_argument(
        "--utilisation",
        type=float,
        default=0.7,
        help="share of a core a process may use in the plan (default 0.7)",
    )
    parser.add_argument(
        "--broker-connections",
        type=int,
        default=20_000,
        help="client connections one broker node takes (default 20000)",
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="measure this machine's costs first (under two minutes) and store "
        "them; the jobs run their sensors at --rate",
    )
    parser.add_argument(
        "--calibrate-sensors",
        default="60,250,1000,2000",
        help="sensors of the calibration's real jobs, each at --rate updates/s "
        "(default 60,250,1000,2000; '': bursts only)",
    )
    parser.add_argument(
        "--calibration", metavar="PATH", help="where costs are stored (JSON)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def _si(x: float, unit: str) -> str:
    for scale, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= scale:
            return f"{x / scale:.3g} {prefix}{unit}"
    return f"{x:.3g} {unit}"


def run(args: argparse.Namespace) -> int:
    from edgeps import kernels
    from edgeps.lab.plan import calibrate as plan_calibrate
    from edgeps.lab.plan.capacity import DEFAULT_CALIBRATION, PlanInput, plan

    try:
        spec = kernels.ModelSpec.parse(args.model)
        inp = PlanInput(
            sensors=args.sensors,
            model=str(spec),
            n_params=spec.n_params,
            rate=args.rate,
            link_bps=args.link,
            relays=args.relays,
            compress=args.compress.strip().lower(),
            fan_in=args.fan_in,
            chunk=args.chunk,
            heartbeat_s=args.heartbeat,
            utilisation=args.utilisation,
            broker_connections=args.broker_connections,
        )
        inp.check()
    except ValueError as exc:
        print(f"edgeps plan: {exc}", file=sys.stderr)
        return 2
    path = Path(args.calibration) if args.calibration else plan_calibrate.default_path()
    if args.calibrate:
        print("calibrating (core, mosquitto, coordinator) ...", file=sys.stderr)
        jobs = tuple(int(x) for x in args.calibrate_sensors.split(",") if x.strip())
        if jobs and inp.rate < 0.5:
            print(
                "edgeps plan: --calibrate runs its jobs at --rate, which needs "
                "at least 0.5 updates/s per sensor for its 12 s windows",
                file=sys.stderr,
            )
            return 2
        cal = plan_calibrate.calibrate(inp.n_params, job_sensors=jobs, rate=inp.rate)
        plan_calibrate.save(cal, path)
        print(f"stored in {path}", file=sys.stderr)
    else:
        cal = plan_calibrate.load(path) or DEFAULT_CALIBRATION
    result = plan(inp, cal)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    print(_text(result))
    return 0


def _text(p: object) -> str:
    from edgeps.lab.plan.capacity import Plan
    from edgeps.observe.table import table

    assert isinstance(p, Plan)
    inp, sz, link = p.inp, p.sizes, p.link
    lines = [
        f"{inp.sensors} sensors x {inp.rate:g} updates/s, model {inp.model} "
        f"({inp.n_params} params), UPDATE {inp.compress}, links "
        f"{_si(inp.link_bps, 'bit/s')}, "
        + (f"{inp.relays} relays" if inp.relays else "no relays"),
        f"one update: UPDATE {sz.update_bytes} B in {sz.update_packets} publish(es),"
        f" PARAMS {sz.params_bytes} B in {sz.params_packets}; heartbeat "
        f"{sz.heartbeat_bytes} B every {inp.heartbeat_s:g} s",
        f"sensor link: up {_si(8 * link['up_bytes_per_s'], 'bit/s')} "
        f"({link['up_utilisation']:.0%}), down "
        f"{_si(8 * link['down_bytes_per_s'], 'bit/s')} "
        f"({link['down_utilisation']:.0%}); an UPDATE takes "
        f"{link['update_transfer_s']:.2f} s; at most {link['max_rate_per_s']:.3g} "
        "updates/s fit",
        "",
    ]
    rows = [
        [
            t.name,
            str(t.count),
            str(t.need),
            f"{t.msgs_in:.4g}",
            f"{t.msgs_out:.4g}",
            _si(t.bytes_per_s, "B/s"),
            f"{t.cpu_cores:.3g}",
            t.note,
        ]  # fmt: skip
        for t in p.tiers
    ]
    header = ["tier", "count", "needs", "msgs/s in", "msgs/s out", "bytes/s",
              "cores", "per one of them"]  # fmt: skip
    lines.append(table(header, rows))
    rb = p.round_bytes
    lines += [
        "",
        "per round of every worker (Alqahtani & Demirbas 2019): the host is one PS,"
        f" its broker link moves {_si(rb['host_link_per_round'], 'B')} (2NM);",
        "  a round released together (BSP, K-of-N: one shared PARAMS publish and"
        f" a RELEASE per worker) cuts it to "
        f"{_si(rb['host_link_one_publish_per_round'], 'B')} while the broker still "
        f"delivers every copy ({_si(rb['broker_per_round'], 'B')} through it); "
        f"each board moves {_si(rb['per_board_per_round'], 'B')}, as a ring "
        f"all-reduce worker would ({_si(rb['ring_per_worker_per_round'], 'B')}),"
        " but MQTT boards never reach each other",
    ]
    if inp.relays:
        lines.append(
            f"  relays: the host moves {_si(rb['host_link_per_round'], 'B')} per "
            f"round instead of {_si(rb['host_link_without_relays'], 'B')}"
        )
    cal = p.calibration
    lines += ["", f"costs: {cal.source}"]
    if cal.host_loads:
        curve = ", ".join(f"{x:.4g}/s {y:.3g}" for x, y in cal.host_loads)
        bcurve = ", ".join(f"{x:.4g}/s {y:.3g}" for x, y in cal.broker_loads)
        lines += [
            f"  serve cores at {cal.job_rate:g} updates/s per sensor "
            f"({cal.job_n_params} params): {curve}; + "
            f"{cal.host_per_param_us:.3g} us per update and extra param",
            f"  mosquitto cores by publishes/s in: {bcurve or '-'}",
        ]
    else:
        lines.append(
            f"  host {cal.host_fixed_us:.0f} us + {cal.host_per_param_us:.3g} "
            f"us/param per update, broker {cal.broker_us_per_msg:.1f} us per "
            f"message, core alone {cal.core_us_per_update:.0f} us"
        )
    lines += [f"! {w}" for w in p.warnings]
    return "\n".join(lines)
