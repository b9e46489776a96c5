"""`edgeps emulate`: N emulated MQTT sensors running the real worker loop.

Two engines, one command (`pick_engine`): ``--engine loop`` runs thousands
of sensors from one event loop per process (``edgeps.emulate.runner``,
``--processes`` to spread them over cores); ``--engine threads`` runs one
thread per sensor (``edgeps.emulate.emulation``) for small runs and shaped
links.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from dataclasses import asdict
from typing import Any

from edgeps.core.defaults import JOB
from edgeps.emulate.common import add_compute_flags
from edgeps.emulate.emulation import MAX_SENSORS, Emulation
from edgeps.netem.flags import add_link_flags, link_overrides
from edgeps.runtime.connection_flags import (
    add_connection_flags,
    connection_options,
    read_key,
    setup_logging,
)
from edgeps.runtime.model_forms import EXAMPLES
from edgeps.transport.options import probe_broker

THREADS_UP_TO = 64  # --engine auto: above this, one event loop per process


def configure(parser: argparse.ArgumentParser) -> None:
    from edgeps.workloads.scenarios import SCENARIOS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "example:\n  edgeps emulate --broker mqtt://127.0.0.1:1883 --job lab "
        "--workers 8 --scenario stragglers --max-time 120"
    )
    add_connection_flags(parser)
    parser.add_argument("--job", required=True, help="job id, as given to serve")
    parser.add_argument(
        "--workers", type=int, default=8, help="emulated sensors (default: 8)"
    )
    parser.add_argument(
        "--scenario",
        default="homogeneous",
        type=scenario_name,
        help=f"sensor behaviour: {', '.join(SCENARIOS)}; disturbed:burst=..,"
        "period=..,share=..,workers=.. sets the disturbance (default: homogeneous)",
    )
    parser.add_argument(
        "--dataset", default="sensors", help="built-in dataset (default: sensors)"
    )
    parser.add_argument("--seed", type=int, default=0, help="data split (default: 0)")
    iid = parser.add_mutually_exclusive_group()
    iid.add_argument("--iid", dest="iid", action="store_true", default=True)
    iid.add_argument("--non-iid", dest="iid", action="store_false")
    iid.add_argument(
        "--partition",
        metavar="SCHEME",
        help="split of the training rows: iid, dirichlet:A or labelmix:A "
        "(instead of --iid / --non-iid's dirichlet:0.5)",
    )
    parser.add_argument(
        "--max-time",
        dest="duration",
        type=float,
        metavar="S",
        help="stop after this many seconds (default: when the job is done)",
    )
    parser.add_argument(
        "--batch", type=int, default=JOB.batch, help=f"minibatch (default: {JOB.batch})"
    )
    parser.add_argument(
        "--model", help=f"train this instead of the job's MODEL ({EXAMPLES})"
    )
    parser.add_argument(
        "--max-iterations", type=int, default=0, help="per sensor (default 0: never)"
    )
    add_link_flags(parser)
    add_compute_flags(parser)
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        metavar="N",
        help="event-loop processes to spread the sensors over (default: 1)",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "loop", "threads"),
        default="auto",
        help="loop: one event loop per process (thousands of sensors); threads: "
        f"one thread per sensor (<= {MAX_SENSORS}, shaped links); auto: threads "
        f"up to {THREADS_UP_TO} sensors in one process or with --link-rate, "
        "else loop",
    )
    energy = parser.add_argument_group("energy (edgeps.workloads.energy)")
    energy.add_argument(
        "--board",
        default="esp32",
        choices=("esp32", "pi"),
        help="power model of each sensor's usage (default: esp32)",
    )
    energy.add_argument(
        "--sleep-at-barrier",
        action="store_true",
        help="count a sensor waiting for its release as asleep (light sleep)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON, not a table")


def scenario_name(text: str) -> str:
    """``--scenario``: a known name, or disturbed with its parameters."""
    from edgeps.workloads.bursts import parse_bursts
    from edgeps.workloads.scenarios import SCENARIOS

    base, colon, params = text.partition(":")
    try:
        if base not in SCENARIOS or (colon and base != "disturbed"):
            raise ValueError(f"known: {', '.join(SCENARIOS)}")
        if colon:
            parse_bursts(params)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"bad scenario {text!r}: {exc}") from None
    return text


def pick_engine(engine: str, n_workers: int, processes: int, shaped: bool) -> str:
    """The engine `edgeps emulate` runs: "loop" or "threads"."""
    if engine != "auto":
        return engine
    if shaped or (processes == 1 and n_workers <= THREADS_UP_TO):
        return "threads"
    return "loop"


def _table(emu: Any) -> str:
    cols = ("worker", "profile", "lives", "clock", "pushes", "releases",
            "reconnects", "resends", "rejects", "retx", "up_B", "down_B", "J",
            "loss", "end")  # fmt: skip
    rows = [cols]
    for r in emu.reports.values():
        rows.append((
            r.worker_id, r.profile, str(r.lives), str(r.clock),
            str(r.stats.get("pushes", 0)), str(r.stats.get("releases", 0)),
            str(r.stats.get("reconnects", 0)), str(r.stats.get("resends", 0)),
            str(r.stats.get("rejects", 0)), str(r.retransmits),
            str(r.usage.get("bytes_up", "-")), str(r.usage.get("bytes_down", "-")),
            _joules(r.usage), f"{r.last_loss:.4f}", r.stop_reason or r.error,
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(cols))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in rows]  # fmt: skip
    return "\n".join(lines)


def _joules(usage: dict[str, Any]) -> str:
    j = usage.get("joules")
    return "-" if j is None else f"{j:.3g}"


def _partition(scheme: str | None) -> str | None:
    from edgeps.emulate.common import check_partition

    return None if scheme is None else check_partition(scheme)


def per_board(reports: Any) -> dict[str, float | None]:
    """Means over sensors of their usage (edgeps.emulate.usage): bytes, s, J."""
    keys = ("bytes_up", "bytes_down", "alive", "compute", "waiting", "joules")
    used = [r.usage for r in reports if r.usage]
    return {
        k: (round(sum(u[k] for u in used) / len(used), 5) if used else None)
        for k in keys
    }


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    shaped = args.link_rate is not None
    engine = pick_engine(args.engine, args.workers, args.processes, shaped)
    try:
        from edgeps.commands.flag_ranges import BATCH, check_flag, workers
        from edgeps.emulate.runner import MAX_LOOP_SENSORS

        most = MAX_LOOP_SENSORS if engine == "loop" else MAX_SENSORS
        check_flag("--workers", args.workers, workers(most))
        check_flag("--batch", args.batch, BATCH)
        options: dict[str, Any] = dict(
            n_workers=args.workers,
            scenario=args.scenario, dataset=args.dataset, seed=args.seed,
            iid=args.iid, partition=_partition(args.partition),
            duration=args.duration, batch=args.batch,
            model=args.model, max_iterations=args.max_iterations,
            hmac_key=read_key(args.hmac_key_file), **link_overrides(args),
            compute_time=args.compute_time, compute_jitter=args.compute_jitter,
            pace=args.pace, board=args.board,
            sleep_at_barrier=args.sleep_at_barrier,
        )  # fmt: skip
        emu: Any
        if engine == "loop":
            from edgeps.emulate.runner import LoopEmulation

            opts = connection_options(args)  # gc_freeze: this process is ours
            emu = LoopEmulation(opts, args.job, processes=args.processes,
                                gc_freeze=True, **options)  # fmt: skip
        elif args.processes != 1:
            raise ValueError("--processes needs the loop engine")
        else:
            emu = Emulation(connection_options(args), args.job, **options)
        probe_broker(connection_options(args))
    except (ValueError, FileNotFoundError, ConnectionError) as exc:
        print(f"edgeps emulate: error: {exc}", file=sys.stderr)
        return 2
    stop_signal = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda s, f: stop_signal.set())
        signal.signal(signal.SIGINT, lambda s, f: stop_signal.set())
    emu.start()
    while emu.running and not stop_signal.wait(0.2):
        pass
    emu.stop()
    emu.join(30)
    if args.json:
        out = {
            "elapsed": round(emu.elapsed(), 3),
            "scenario": args.scenario,
            "engine": engine,
            "workers": [asdict(r) for r in emu.reports.values()],
            "per_board": per_board(emu.reports.values()),
        }
        if engine == "loop":
            out["cost"] = emu.cost
        print(json.dumps(out, indent=2, default=str))
    else:
        print(_table(emu))
        if engine == "loop":
            c = emu.cost
            print(
                f"emulator: {c['processes']:g} process(es), "
                f"{c['cpu_ms_per_update']:.3f} ms CPU per update, "
                f"{c['rss_kib_per_sensor']:.0f} KiB resident per sensor, "
                f"{c['rss_mib_total']:.0f} MiB in all"
            )
    errors = [r for r in emu.reports.values() if r.stop_reason == "error"]
    return 1 if errors else 0
