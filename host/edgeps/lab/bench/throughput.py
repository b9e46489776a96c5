"""`edgeps bench throughput`: PS updates applied per second vs the raw broker echo rate.

Both numbers come from one run on a private mosquitto (free loopback port),
for the same payload size, measured the same way on the receiving process:

- raw echo: a feeder process publishes QoS1 messages of the size of one
  encoded UPDATE to a topic; this process (a `HostLink`, the coordinator's
  own receive path) counts what arrives.
- PS: the feeder publishes real UPDATE messages for several joined workers;
  the real `Coordinator` (ASP, so every push is released at once) decodes,
  reassembles, validates, applies and publishes each release (the current
  parameters, QoS1) to the worker's down topic.

The feeder runs in its own process so that it does not share a GIL with the
side being measured. Rates are (n - 1) / (time of the last - time of the first).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from edgeps.lab.bench.throughput_feed import (
    BIG_CHUNK,
    DEADLINE,
    JOB,
    RAW_TOPIC,
    start_feeder,
    stop_feeder,
    update_payloads,
)

SIZES = (1024, 16384, 65536)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (median)")
    parser.add_argument(
        "--sizes",
        default=",".join(str(s) for s in SIZES),
        help="model sizes in float32 parameters, comma separated",
    )
    parser.add_argument(
        "--messages", type=int, default=0, help="updates per run (default: by size)"
    )
    parser.add_argument(
        "--chunk",
        type=int,
        default=0,
        help="split each update (and release) into chunks of this many bytes, as a "
        "board does (default: one message per update); echo and receive rates "
        "are then per update of the same chunks",
    )


def _n_messages(n_params: int, override: int) -> int:
    if override:
        return override
    # about 1-2 s of traffic per run at loopback rates
    return {1024: 6000, 16384: 3000}.get(n_params, 1000 if n_params > 16384 else 3000)


def _inbox_bytes(n_params: int, n: int) -> int:
    """Room for a whole run in the inbox: the bench measures rates, not drops."""
    return (n + 100) * (4 * n_params + 1024)


@dataclass(frozen=True)
class Measure:
    """A rate (messages or updates per second) and this process's CPU per message."""

    rate: float
    cpu_us: float


def _rate(first: float | None, last: float | None, n: int) -> float:
    if first is None or last is None or n < 2 or last <= first:
        return 0.0
    return (n - 1) / (last - first)


def _count(link: Any, n: int, alive: Any, per_update: int = 1) -> Measure:
    """Drain `n` messages from a HostLink inbox; rate between first and last.

    With ``per_update`` chunks per update, rate and CPU are per update.
    """
    first = last = None
    got = 0
    cpu0 = time.process_time()
    deadline = time.monotonic() + DEADLINE
    quiet_since = time.monotonic()
    while got < n and time.monotonic() < deadline:
        if link.get(0.2) is None:
            # the sender is gone and nothing more is coming: stop waiting
            if not alive() and time.monotonic() - quiet_since > 3.0:
                break
            continue
        last = quiet_since = time.monotonic()
        first = first or last
        got += 1
    cpu = time.process_time() - cpu0
    k = per_update
    return Measure(_rate(first, last, got) / k, 1e6 * cpu * k / max(got, 1))


def measure_echo(
    host: str, port: int, n_params: int, n: int, chunk: int = 0
) -> Measure:
    """Raw broker echo: one paho client publishes QoS1, another subscribes (msgs/s).

    Both clients live in this process, so per message it does what the PS
    process does per update: one QoS1 publish and one QoS1 receive.
    """
    from edgeps.transport.host_link import HostLink
    from edgeps.transport.options import ConnectionOptions

    addr = ConnectionOptions(f"mqtt://{host}:{port}")
    rx = HostLink(
        addr,
        client_id="bench-echo-rx",
        subscriptions=[(RAW_TOPIC, 1)],
        queue_size=n + 10,
        queue_bytes=_inbox_bytes(n_params, n),
    )
    tx = HostLink(addr, client_id="bench-echo-tx", subscriptions=[])
    rx.start()
    tx.start()
    chunks = update_payloads(n_params, 1, chunk)[0]
    k = len(chunks)
    sender = threading.Thread(
        target=lambda: [tx.publish(RAW_TOPIC, c, 1) for _ in range(n) for c in chunks]
    )
    try:
        time.sleep(0.3)  # the subscription is in place before the first publish
        sender.start()
        return _count(rx, n * k, sender.is_alive, k)
    finally:
        sender.join(DEADLINE)
        tx.stop()
        rx.stop()


def measure_receive(
    host: str, port: int, n_params: int, n: int, chunk: int = 0
) -> Measure:
    """Receive only: a feeder process publishes, this process counts (msgs/s)."""
    from edgeps.transport.host_link import HostLink
    from edgeps.transport.options import ConnectionOptions

    link = HostLink(
        ConnectionOptions(f"mqtt://{host}:{port}"),
        client_id="bench-raw-rx",
        subscriptions=[(RAW_TOPIC, 1)],
        queue_size=n + 10,
        queue_bytes=_inbox_bytes(n_params, n),
    )
    link.start()
    proc, go = start_feeder(host, port, "raw", n_params, n, chunk)
    k = len(update_payloads(n_params, 1, chunk)[0])
    try:
        time.sleep(0.3)
        go.set()
        return _count(link, n * k, proc.is_alive, k)
    finally:
        link.stop()
        stop_feeder(proc)


def measure_ps(host: str, port: int, n_params: int, n: int, chunk: int = 0) -> Measure:
    """Updates/s applied by the real coordinator, each released with a publish."""
    from edgeps_worker import wire_host as wire

    from edgeps.core import ParameterServer
    from edgeps.policy.asp import ASP
    from edgeps.runtime.coordinator import Coordinator, Settings
    from edgeps.transport.host_link import HostLink
    from edgeps.transport.options import ConnectionOptions

    params = np.zeros(n_params, dtype=np.float32)
    server = ParameterServer(params, policy=ASP(), lr=0.01, liveness_timeout=60.0)
    link = HostLink(
        ConnectionOptions(f"mqtt://{host}:{port}"),
        client_id="bench-ps",
        subscriptions=[(wire.topic_up_wildcard(JOB), 1)],
        queue_size=n + 100,
        queue_bytes=_inbox_bytes(n_params, n),
    )
    link.start()
    settings = Settings(
        job=JOB,
        model=f"linear:{n_params - 1}",
        max_updates=n,
        max_time=DEADLINE,
        eval_interval=3600.0,
        metrics_interval=3600.0,
        send_rejects=False,
    )
    coord = Coordinator(server, link, settings, policy_name="asp")
    proc, go = start_feeder(host, port, "ps", n_params, n, chunk)
    done = threading.Event()

    def watchdog() -> None:
        go.set()
        while not done.wait(0.2):
            if not proc.is_alive():
                # the feeder finished (or died): whatever is still queued gets 3 s
                if not done.wait(3.0):
                    coord.stop()
                return

    runner = threading.Timer(0.5, watchdog)
    try:
        runner.start()
        cpu0 = time.process_time()  # idle waiting around the burst costs ~nothing
        coord.run()
        cpu = time.process_time() - cpu0
        link.flush(10.0)
    finally:
        done.set()
        runner.join()
        link.stop()
        stop_feeder(proc)
    rate = _rate(coord.first_applied_at, coord.last_applied_at, coord.applied)
    return Measure(rate, 1e6 * cpu / max(coord.applied, 1))


def run_bench(
    sizes: list[int], repeat: int, messages: int, chunk: int = 0
) -> list[dict[str, Any]]:
    from edgeps.transport.broker import start_mosquitto

    rows = []
    with start_mosquitto() as broker:
        for n_params in sizes:
            n = _n_messages(n_params, messages)
            echos: list[Measure] = []
            recvs: list[Measure] = []
            pss: list[Measure] = []
            for _ in range(repeat):
                # interleaved, so slow drift of the machine hits all alike
                at = (broker.host, broker.port, n_params, n, chunk)
                echos.append(measure_echo(*at))
                recvs.append(measure_receive(*at))
                pss.append(measure_ps(*at))
            raw = statistics.median(m.rate for m in echos)
            recv = statistics.median(m.rate for m in recvs)
            ps = statistics.median(m.rate for m in pss)
            echo_cpu = statistics.median(m.cpu_us for m in echos)
            ps_cpu = statistics.median(m.cpu_us for m in pss)
            parts = update_payloads(n_params, 1, chunk)[0]
            payload = sum(len(c) for c in parts)
            rows.append(
                {
                    "n_params": n_params,
                    "payload_bytes": payload,
                    "messages": n,
                    "chunks_per_update": len(parts),
                    "echo_msgs_per_s": round(raw, 1),
                    "receive_msgs_per_s": round(recv, 1),
                    "ps_updates_per_s": round(ps, 1),
                    "ratio": round(ps / raw, 3) if raw > 0 else None,
                    "ratio_vs_receive": round(ps / recv, 3) if recv > 0 else None,
                    "echo_cpu_us": round(echo_cpu, 1),
                    "receive_cpu_us": round(
                        statistics.median(m.cpu_us for m in recvs), 1
                    ),
                    "ps_cpu_us": round(ps_cpu, 1),
                    "cpu_ratio": round(echo_cpu / ps_cpu, 3) if ps_cpu > 0 else None,
                    "echo_runs": [round(m.rate, 1) for m in echos],
                    "receive_runs": [round(m.rate, 1) for m in recvs],
                    "ps_runs": [round(m.rate, 1) for m in pss],
                }
            )
    return rows


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'params':>7} {'payload B':>10} {'chunks':>6} {'updates':>7} {'echo/s':>8} "
        f"{'recv/s':>8} {'PS upd/s':>9} {'PS/echo':>8} {'PS/recv':>8} "
        f"{'echo us':>8} {'PS us':>7}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['n_params']:>7} {r['payload_bytes']:>10} "
            f"{r['chunks_per_update']:>6} {r['messages']:>7} "
            f"{r['echo_msgs_per_s']:>8.0f} {r['receive_msgs_per_s']:>8.0f} "
            f"{r['ps_updates_per_s']:>9.0f} {_fmt(r['ratio']):>8} "
            f"{_fmt(r['ratio_vs_receive']):>8} "
            f"{r['echo_cpu_us']:>8.0f} {r['ps_cpu_us']:>7.0f}"
        )
    lines.append(
        "medians; QoS1 on a private mosquitto (127.0.0.1). echo: this process "
        "publishes and receives each message; recv: receive only; PS: decode, "
        "apply, release publish; rates and CPU (us) per update in this process"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    try:
        sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    except ValueError:
        print(
            f"edgeps bench throughput: error: bad --sizes {args.sizes!r}",
            file=sys.stderr,
        )
        return 2
    if not sizes or any(s < 2 or s > 1 << 22 for s in sizes):
        print(
            "edgeps bench throughput: error: --sizes must be in 2..4194304",
            file=sys.stderr,
        )
        return 2
    if args.repeat < 1 or args.messages < 0 or args.messages == 1:
        print(
            "edgeps bench throughput: error: --repeat >= 1, --messages >= 2",
            file=sys.stderr,
        )
        return 2
    if args.chunk and not 256 <= args.chunk <= BIG_CHUNK:
        print(
            f"edgeps bench throughput: error: --chunk must be in 256..{BIG_CHUNK}",
            file=sys.stderr,
        )
        return 2
    rows = run_bench(sizes, args.repeat, args.messages, args.chunk)
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    return 0
