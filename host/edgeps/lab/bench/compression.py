"""`edgeps bench compression`: uplink codecs on slow links, real broker and simulator.

Per row (``UP[/DOWN]``: serve's ``--compress UP`` and ``--compress-down
DOWN``, default f32; rows f32, f16, int8, topk:0.01, int8/int8) and repeat: a private
mosquitto on 127.0.0.1, `edgeps serve` (the in-process Job, DSP, the dataset's
default model) and N emulated sensors behind the shaping relay (`edgeps
emulate --link-rate --link-delay`). A passive client on the broker counts the
real payload bytes of every UPDATE, PARAMS and host publication. Columns:
bytes per UPDATE and per PARAMS (whole logical messages, all chunks; a
shared copy of a release round counts once), host bytes published per second
(PARAMS, shared copies, RELEASEs, WELCOMEs, MODEL), final accuracy and time
to the target (medians of ``--repeat``), and `edgeps simulate --compress UP
--compress-down DOWN` for the same row. Times run
on the broker's clock of the sniffer: from the first HELLO to the MODEL
``done`` the PS publishes when it reaches the target.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from typing import Any

from edgeps.core.defaults import JOB

DEFAULT_ROWS = ("f32", "f16", "int8", "topk:0.01", "int8/int8")


def configure(parser: argparse.ArgumentParser) -> None:
    rows = ",".join(DEFAULT_ROWS)
    help_rows = f"UP[/DOWN] codecs per row (default: {rows})"
    parser.add_argument("--rows", default=rows, help=help_rows)
    parser.add_argument("--repeat", type=int, default=3, help="runs per row (median)")
    parser.add_argument("--workers", type=int, default=8, help="emulated sensors")
    parser.add_argument("--link-rate", type=float, default=250e3, help="bits/s")
    parser.add_argument("--link-delay", type=float, default=0.02, help="seconds")
    parser.add_argument("--target-accuracy", type=float, default=0.9)
    parser.add_argument("--max-time", type=float, default=90.0, help="per run")
    parser.add_argument("--policy", default="dsp")
    parser.add_argument(
        "--lr", type=float, default=JOB.lr, help="serve's and the sim's"
    )
    parser.add_argument("--eval-interval", type=float, default=0.1,
                        help="seconds between accuracy checks, both sides")  # fmt: skip
    parser.add_argument("--no-sim", action="store_true", help="skip the simulator")
    quick = "for tests: 1 run, 4 sensors, f32 and int8, no simulator"
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--json", action="store_true", help="print JSON instead")


class Sniffer:
    """A passive client on the broker: payload bytes per message kind of a job."""

    def __init__(self, url: str, job: str) -> None:
        import paho.mqtt.client as mqtt
        from edgeps_worker import wire_host as wire

        self.wire = wire
        self.lock = threading.Lock()
        self.update_bytes = 0
        self.params_bytes = 0
        self.host_bytes = 0  # everything the PS published (down topics, MODEL)
        self.updates: set[tuple[str, int, int]] = set()
        self.releases: set[tuple[str, int, int, int]] = set()
        self.first_hello: float | None = None
        self.hellos: dict[str, float] = {}  # first HELLO per worker
        self.first_update: float | None = None  # the first UPDATE of the job
        # payload bytes after the MODEL done: on the sensors' own up and down
        # topics (summed over sensors), and on shared topics (each sensor's copy)
        self.closing = {"up": 0, "down": 0, "shared": 0}
        self.done_at: float | None = None
        self.bad = 0
        self.release_msgs = 0  # RELEASEs: a worker's part of a shared round
        host, port = url.removeprefix("mqtt://").rsplit(":", 1)
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311
        )
        self.client.on_message = self._on_message
        self.client.connect(host, int(port))
        self.client.subscribe(f"edgeps/{job}/#", qos=1)
        self.client.loop_start()

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        payload = bytes(message.payload)
        try:
            msg = self.wire.decode(payload)
        except self.wire.WireError:
            self.bad += 1
            return
        with self.lock:
            if "/up/" not in message.topic:
                self.host_bytes += len(payload)
            if msg.type == self.wire.MODEL and msg.state == "done":
                self.done_at = self.done_at or time.monotonic()
            if self.done_at is not None:
                part = (message.topic.split("/") + ["", "", ""])[2]
                if part != "host":  # the host's own status reaches no sensor
                    where = part if part in ("up", "down") else "shared"
                    self.closing[where] += len(payload)
            if msg.type == self.wire.HELLO:
                self.first_hello = self.first_hello or time.monotonic()
                self.hellos.setdefault(msg.wid, time.monotonic())
            elif msg.type == self.wire.MODEL and msg.state == "done":
                self.done_at = self.done_at or time.monotonic()
            elif msg.type == self.wire.UPDATE:
                self.update_bytes += len(payload)
                self.first_update = self.first_update or time.monotonic()
                self.updates.add((msg.wid, msg.session, msg.seq))
            elif msg.type == self.wire.PARAMS:
                # a shared copy (no worker id, session 0) is one message for all
                self.params_bytes += len(payload)
                self.releases.add((msg.wid, msg.session, msg.version, msg.seq))
            elif msg.type == self.wire.RELEASE:
                self.release_msgs += 1

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def split_row(row: str) -> tuple[str, str]:
    """``"int8/f16"`` -> ("int8", "f16"); a row without a slash keeps PARAMS f32."""
    up, _, down = row.strip().partition("/")
    return up, down or "f32"


def run_once(row: str, args: argparse.Namespace) -> dict[str, Any]:
    """One real-broker run of one row; bytes, times and accuracy."""
    compress, compress_down = split_row(row)
    from edgeps.emulate.emulation import Emulation
    from edgeps.runtime.config import merge
    from edgeps.runtime.job import Job
    from edgeps.transport.broker import open_broker, start_mosquitto

    job_id = "bench"
    with start_mosquitto() as broker:
        sniff = Sniffer(broker.url, job_id)
        cfg = merge({"broker": broker.url, "job": job_id, "policy": args.policy,
                     "compress": compress, "compress_down": compress_down,
                     "target_accuracy": args.target_accuracy,
                     "max_time": args.max_time, "quiet": True, "lr": args.lr,
                     "eval_interval": args.eval_interval})  # fmt: skip
        job = Job(cfg, broker=open_broker(broker.url), banner=False)
        result: dict[str, Any] = {}
        host = threading.Thread(target=lambda: result.update(s=job.run()), daemon=True)
        host.start()
        emu = None
        try:
            if not job.ready.wait(30):
                raise RuntimeError("serve did not start within 30 s")
            emu = Emulation(broker.url, job_id, n_workers=args.workers,
                            duration=args.max_time + 30, link_rate=args.link_rate,
                            link_delay=args.link_delay).start()  # fmt: skip
            host.join(args.max_time + 60)
        finally:
            job.stop()
            host.join(20)
            if emu is not None:
                emu.stop()
                emu.join(30)
            sniff.close()
    summary = result["s"]
    with sniff.lock:
        t0 = sniff.first_hello or time.monotonic()
        span = max(1e-9, (sniff.done_at or time.monotonic()) - t0)
        reached = summary.stop_reason == "target_accuracy"
        return {
            "compress": row,
            "update_bytes": sniff.update_bytes / max(1, len(sniff.updates)),
            "params_bytes": sniff.params_bytes / max(1, len(sniff.releases)),
            "host_bytes_per_s": sniff.host_bytes / span,
            "final_accuracy": summary.accuracy,
            "time_to_target": span if reached else None,
            # seconds from the first sensor's HELLO to the last one's
            "join_spread": max(sniff.hellos.values(), default=t0) - t0,
            "updates": summary.updates,
            "rejected": sum(w["rejected"] for w in summary.workers.values()),
            "release_messages": sniff.release_msgs,
        }


def sim_time(row: str, args: argparse.Namespace) -> float | None:
    """`edgeps simulate` of the same row: virtual seconds to the target.

    Seed 0, as serve and the emulation use: the same data split and initial
    parameters (the real runs differ only in timing; the simulator is
    deterministic for a seed)."""
    from edgeps.sim.simulator import simulate
    from edgeps.sim.types import SimConfig

    compress, compress_down = split_row(row)
    cfg = SimConfig(policy=args.policy, scenario="homogeneous", seed=0,
                    n_workers=args.workers, link_rate=args.link_rate,
                    link_delay=args.link_delay, lr=args.lr,
                    eval_interval=args.eval_interval,
                    target_accuracy=args.target_accuracy, max_time=args.max_time,
                    compress=compress, compress_down=compress_down)  # fmt: skip
    return simulate(cfg).time_to_target


def _median(values: list[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    # a run that missed the target counts as slower than every run that hit it
    if len(got) * 2 <= len(values):
        return None
    return float(
        statistics.median(sorted(got) + [float("inf")] * (len(values) - len(got)))
    )


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows = []
    for compress in [r.strip() for r in args.rows.split(",") if r.strip()]:
        runs = [run_once(compress, args) for _ in range(args.repeat)]
        row: dict[str, Any] = {"compress": compress, "runs": runs}
        for key in ("update_bytes", "params_bytes", "host_bytes_per_s"):
            row[key] = statistics.median(r[key] for r in runs)
        accs = [r["final_accuracy"] for r in runs if r["final_accuracy"] is not None]
        row["final_accuracy"] = statistics.median(accs) if accs else None
        row["time_to_target"] = _median([r["time_to_target"] for r in runs])
        row["sim_time_to_target"] = None if args.no_sim else sim_time(compress, args)
        rows.append(row)
    base = next((r for r in rows if r["compress"] == "f32"), None)
    for r in rows:
        r["update_vs_f32"] = r["update_bytes"] / base["update_bytes"] if base else None
    return rows


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def run(args: argparse.Namespace) -> int:
    from edgeps.codecs import parse_compress
    from edgeps.kernels import params_codec
    from edgeps.netem.units import format_rate

    if args.quick:
        args.repeat, args.workers, args.no_sim = 1, 4, True
        args.rows, args.max_time = "f32,int8", min(args.max_time, 60.0)
    try:
        for r in args.rows.split(","):
            up, down = split_row(r)
            parse_compress(up)
            params_codec.parse_code(down)
        if args.repeat < 1 or args.workers < 1:
            raise ValueError("--repeat and --workers must be at least 1")
        rows = measure(args)
    except (ValueError, FileNotFoundError, RuntimeError) as exc:
        print(f"edgeps bench compression: {exc}", file=sys.stderr)
        return 2
    if args.json:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        print(json.dumps({"config": config, "rows": rows}))
        return 0
    print(f"{args.workers} emulated sensors, policy {args.policy}, links "
          f"{format_rate(args.link_rate)} + {args.link_delay * 1000:g} ms, target "
          f"{args.target_accuracy:g}, median of {args.repeat}")  # fmt: skip
    head = ("codec", "B/UPDATE", "vs f32", "B/PARAMS", "host B/s", "final acc",
            "t_target s", "sim t s")  # fmt: skip
    print("  ".join(f"{h:>10}" for h in head))
    for r in rows:
        cells = (r["compress"], _fmt(r["update_bytes"], ".0f"),
                 _fmt(r["update_vs_f32"], ".3f"), _fmt(r["params_bytes"], ".0f"),
                 _fmt(r["host_bytes_per_s"], ".0f"), _fmt(r["final_accuracy"], ".3f"),
                 _fmt(r["time_to_target"], ".2f"),
                 _fmt(r["sim_time_to_target"], ".2f"))  # fmt: skip
        print("  ".join(f"{c:>10}" for c in cells))
    return 0
