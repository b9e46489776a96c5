"""`edgeps demo`: broker + host coordinator + 8 emulated sensors (2 stragglers), DSP.

One command and nothing else installed: the embedded amqtt broker is preferred
(`--broker mosquitto` opts in to the real one), the sensors are threads running
the real worker loop over MQTT, and the run stops by itself at the target
accuracy or the time limit, then prints one table.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType
from typing import Any

from edgeps.commands.serve import add_job_flags, check_reachable, given
from edgeps.observe import dashboard

DEMO_DEFAULTS: dict[str, Any] = {
    "job": "demo",
    "policy": "dsp",
    "dataset": "sensors",
    "target_accuracy": 0.93,
    "max_time": 90.0,
    "dashboard_linger": 120.0,  # time to look at the page after the target is hit
}


NEXT_STEPS = (
    "next: your own data: `edgeps serve --broker auto --job lab --test-data "
    "test.csv` and on each board `edgeps worker --broker mqtt://HOST:PORT --job "
    "lab --id pi-1 --data local.csv` (serve prints the exact line); watch a run "
    "live with --dashboard 127.0.0.1:8080; the guide: host/README.md"
)


def configure(parser: argparse.ArgumentParser) -> None:
    from edgeps.runtime.config import ServeConfig
    from edgeps.runtime.connection_flags import add_connection_flags

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n  edgeps demo\n  edgeps demo --policy bsp --workers 4\n"
        "  edgeps demo --broker mosquitto --model mlp:64 --json"
    )
    add_connection_flags(
        parser,
        broker_help="auto (embedded amqtt first, then mosquitto), amqtt, "
        "mosquitto, or mqtt[s]://HOST[:PORT] of a running broker",
        defaults={**ServeConfig().to_dict(), **DEMO_DEFAULTS},
        layered=True,
    )
    parser.add_argument(
        "--workers", type=int, default=8, help="emulated sensors (default: 8)"
    )
    parser.add_argument(
        "--scenario",
        default="stragglers",
        help="sensor behaviour: stragglers (2 of 8 are 4x slower), homogeneous, "
        "interference, mixed, churn (default: stragglers)",
    )
    add_job_flags(parser, DEMO_DEFAULTS)
    dashboard.add_arguments(parser)


def _merge_rows(summary: Any, emu: Any) -> None:
    """Add the emulated profile (e.g. 'straggler x4') to each worker's row."""
    for wid, report in emu.reports.items():
        row = summary.workers.setdefault(wid, {})
        row["profile"] = report.profile
        row["lives"] = report.lives
        if report.error:
            row["error"] = report.error


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _stop_on_sigterm() -> Any:
    """Turn SIGTERM into KeyboardInterrupt (main thread only); the handler it
    replaced, None when none was installed."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


def run(args: argparse.Namespace) -> int:
    from edgeps.commands.flag_ranges import check_flag, workers
    from edgeps.emulate.emulation import Emulation
    from edgeps.runtime.config import merge
    from edgeps.runtime.connection_flags import read_key, setup_logging
    from edgeps.runtime.job import Job
    from edgeps.runtime.summary import summary_json, summary_table
    from edgeps.transport.broker import open_broker
    from edgeps.workloads.scenarios import SCENARIOS

    try:
        check_flag("--workers", args.workers, workers(64))
        if args.scenario not in SCENARIOS:
            raise ValueError(
                f"--scenario must be one of {', '.join(SCENARIOS)}, "
                f"got {args.scenario!r}"
            )
        flags = dict(DEMO_DEFAULTS)
        flags.update(given(args))
        flags.pop("workers", None)
        flags.pop("scenario", None)
        cfg = merge(flags)
        setup_logging(cfg.log_level, timestamps=False)
        hmac_key = read_key(cfg.hmac_key_file)
        check_reachable(cfg.broker)  # before any advice about keys
        broker = open_broker(cfg.broker, prefer="amqtt")
    except (
        ValueError,
        TypeError,
        FileNotFoundError,
        RuntimeError,
        ConnectionError,
    ) as exc:
        print(f"edgeps demo: error: {exc}", file=sys.stderr)
        return 2
    out = sys.stderr
    emu = None
    # SIGTERM (a service manager, `kill PID`) stops the demo as Ctrl-C does:
    # the summary is printed and the broker it started is stopped
    previous = _stop_on_sigterm()
    try:
        job = Job(cfg, broker=broker, out=out, banner=False)
        job.open_dashboard()  # a taken port: one line here, not in the host thread
        print(
            f"edgeps demo: {broker.kind} broker at {broker.url}, "
            f"policy {job.policy_name}, model {job.model.spec}, "
            f"{args.workers} sensors ({args.scenario}), "
            f"target accuracy {cfg.target_accuracy}",
            file=out,
        )
        result: dict[str, Any] = {}
        done = threading.Event()

        def host_main() -> None:
            try:
                result.update(summary=job.run())
            finally:
                done.set()

        host = threading.Thread(target=host_main, name="edgeps-host")
        host.start()
        if not job.ready.wait(30) or job.coordinator is None:
            host.join(10)
            raise RuntimeError("the host coordinator did not start")
        emu = Emulation(
            job.options.at(broker.url),
            cfg.job,
            n_workers=args.workers,
            scenario=args.scenario,
            dataset=cfg.dataset,
            seed=cfg.seed,
            duration=(cfg.max_time or 90.0) + 15.0,
            hmac_key=hmac_key,
        ).start()
        # wait on an Event, not join(): on CPython < 3.13 a Ctrl-C inside join()
        # can leave the thread looking finished while it is still running
        try:
            while not done.wait(0.2):
                pass
        except KeyboardInterrupt:
            job.stop()
            done.wait(30)
        emu.stop()
        emu.join(15)
        summary = result.get("summary")
        if summary is None:
            raise RuntimeError("the host coordinator failed; see the log above")
    except (
        ValueError,
        TypeError,
        FileNotFoundError,
        ConnectionError,
        RuntimeError,
    ) as exc:
        print(f"edgeps demo: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if emu is not None:
            emu.stop()
        broker.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    _merge_rows(summary, emu)
    if cfg.json:
        print(summary_json(summary))
    else:
        print(summary_table(summary, operator=False))
        print(NEXT_STEPS)
    return 0
