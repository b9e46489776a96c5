"""`edgeps bench scale`: N emulated sensors at one update per second each.

For each size in ``--sizes`` and each policy (ASP, DSP, and BSP up to
``BSP_UP_TO`` sensors) it starts a private mosquitto with a config of its own
(edgeps.lab.bench.scale_run.BROKER_CONF: no queue, in-flight or connection
limits), ``edgeps serve`` and ``edgeps emulate --engine loop`` whose sensors
compute for about a second per iteration, runs them for ``--max-time``
seconds and reads, over a window that starts after the connect ramp and a
warm-up:

- offered: updates the sensors pushed per second (emulator's count over its
  active time); applied: updates serve applied per second in the window;
  rejected: serve's rejections over the whole run;
- CPU of serve, of the emulator (all its processes) and of the broker, in
  cores (1.0 = one core busy), from /proc;
- serve's inbox depth p99 and push-to-release latency p50/p95 (host side,
  edgeps.runtime.inbound), the broker's dropped publishes ($SYS) and its
  "Outgoing messages are being dropped" log lines;
- the sensors' own round trip p50/p95 (an UPDATE sent to the next release
  computed on: serve's inbox wait and the broker included), the emulator's
  CPU per update, and the whole machine's busy cores (other load included:
  on a shared box, a part starved of CPU shows here, not in its own column);
- the sensors' compute: each iteration lasts 1 s from its start, the real
  gradient included, times a lognormal draw of sigma ``--jitter`` (default 0:
  a sensor that samples once a second and sleeps the rest; 0.05 is
  the homogeneous scenario's own spread; ``--jitter 0,0.05`` runs both);
- in ``--json`` only: serve's CPU by thread (``serve_threads``: ``main``, the
  coordinator; ``others``, paho's network thread) and the 1-minute load
  average at the window's start and end (``load_avg``).
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from dataclasses import asdict
from typing import Any

from edgeps.lab.bench.scale_run import BROKER_CONF, RunResult, RunSpec, one_run

SIZES = (100, 500, 1000, 2000)
POLICIES = ("asp", "dsp", "bsp")
BSP_UP_TO = 1000
MAX_DURATION = 300.0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in SIZES),
        help="sensor counts, comma separated (default: 100,500,1000,2000)",
    )
    parser.add_argument(
        "--policies",
        default=",".join(POLICIES),
        help=f"policies, comma separated (bsp only up to {BSP_UP_TO} sensors)",
    )
    parser.add_argument(
        "--max-time",
        dest="duration",
        type=float,
        default=60.0,
        help=f"seconds per run, at most {MAX_DURATION:g} (default: 60)",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=0,
        help="emulator processes (default: 1 up to 500 sensors, else 2)",
    )
    parser.add_argument(
        "--jitter",
        default="0",
        help="lognormal sigma(s) of each 1 s iteration, comma separated; 0: every "
        "step ends 1 s after it started (default: 0; the scenario's own: 0.05)",
    )
    parser.add_argument(
        "--pace",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="emulate --pace: each step ends 1 s after its release reached the "
        "emulator, its wait for the loop to get to the sensor included",
    )
    parser.add_argument(
        "--model", default=None, help="model (default: the job's, as serve's)"
    )
    parser.add_argument(
        "--lr", type=float, default=None, help="step size (default: the job's)"
    )


def plan(sizes: list[int], policies: list[str]) -> list[tuple[int, str]]:
    """The (sensors, policy) runs, BSP only up to BSP_UP_TO sensors."""
    return [(n, p) for n in sizes for p in policies if p != "bsp" or n <= BSP_UP_TO]


def parse_jitters(text: str) -> list[float]:
    """``--jitter``'s comma-separated sigmas, each a finite number >= 0."""
    out = [float(x) for x in text.split(",") if x.strip()]
    if not out or not all(math.isfinite(j) and j >= 0 for j in out):
        raise ValueError("--jitter takes sigmas >= 0, comma separated")
    return out


def _fmt(v: Any, spec: str = ".0f") -> str:
    return "-" if v is None else format(v, spec)


def table(rows: list[RunResult]) -> str:
    cols = ("sensors", "policy", "jitter", "pace", "accuracy", "state",
            "offered/s", "applied/s", "rejected",
            "serve_cpu", "emu_cpu", "broker_cpu", "inbox_p99", "lat_p50_ms",
            "lat_p95_ms", "broker_dropped", "rtt_p50_ms", "rtt_p95_ms", "emu_ms/upd",
            "box_cpu")  # fmt: skip
    out: list[tuple[str, ...]] = [cols]
    for r in rows:
        dropped = r.broker_dropped if r.broker_dropped is not None else 0
        out.append((
            str(r.sensors), r.policy, _fmt(r.jitter, "g"), "yes" if r.pace else "no",
            _fmt(r.accuracy, ".3f"), r.state or "-",
            _fmt(r.offered_per_s),
            _fmt(r.applied_per_s),
            str(r.rejected), _fmt(r.serve_cpu, ".2f"), _fmt(r.emulator_cpu, ".2f"),
            _fmt(r.broker_cpu, ".2f"), _fmt(r.inbox_depth_p99),
            _fmt(r.latency_ms_p50, ".1f"), _fmt(r.latency_ms_p95, ".1f"),
            f"{dropped}+{r.broker_log_drops}log",
            _fmt(r.emulator.get("round_trip_ms_p50"), ".0f"),
            _fmt(r.emulator.get("round_trip_ms_p95"), ".0f"),
            _fmt(r.emulator.get("cpu_ms_per_update"), ".3f"), _fmt(r.box_cpu, ".2f"),
        ) if not r.error else (str(r.sensors), r.policy, "error: " + r.error)
        + ("",) * (len(cols) - 3))  # fmt: skip
    widths = [max(len(row[i]) for row in out) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
             for row in out]  # fmt: skip
    lines.append(
        "accuracy, state: serve's final test accuracy and job state, so a "
        "throughput counts only where the job learns; jitter: lognormal sigma "
        "of each sensor's 1 s iteration (0: each step ends 1 s after it "
        "started, the real gradient included); pace: that "
        "second counts from the release's arrival at the emulator; "
        "CPU in cores (1.00 = one core busy) over the measuring window; "
        "latency: host side, UPDATE complete -> its release published; "
        "broker_dropped: $SYS publish/messages/dropped + log lines; rtt: sensor "
        "side, its UPDATE sent -> the next release computed on (inbox wait "
        "included); box_cpu: the whole machine, other load included"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    except ValueError:
        print("edgeps bench scale: --sizes takes integers", flush=True)
        return 2
    try:
        jitters = parse_jitters(args.jitter)
    except ValueError as exc:
        print(f"edgeps bench scale: {exc}", flush=True)
        return 2
    if not sizes or min(sizes) < 1 or not 5.0 <= args.duration <= MAX_DURATION:
        print(f"edgeps bench scale: sizes >= 1, duration in 5..{MAX_DURATION:g} s")
        return 2
    # a SIGTERM unwinds like Ctrl-C, so each run's finally stops its processes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    rows = []
    for jitter in jitters:
        for n, policy in plan(sizes, policies):
            procs = args.processes or (1 if n <= 500 else 2)
            spec = RunSpec(
                n,
                policy,
                args.duration,
                args.model,
                args.lr,
                procs,
                jitter=jitter,
                pace=args.pace,
            )
            rows.append(one_run(spec))
            if not args.json:
                print(table(rows[-1:]).splitlines()[1], flush=True)
    if args.json:
        out = {"broker_conf": BROKER_CONF, "rows": [asdict(r) for r in rows]}
        print(json.dumps(out, indent=2))
    else:
        print(table(rows))
    return 0
