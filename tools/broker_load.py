"""Load a private mosquitto as a job of many sensors does, and say what it dropped.

N sensor connections (paho clients driven by one selector loop, each its own
MQTT client id) publish synchronised bursts of QoS 1 messages to
``load/up/<id>``, as every sensor's chunked update does when a BSP round
releases them together; one host connection (like serve's) subscribes to
``load/up/+`` and spends ``--host-cost-us`` of CPU on each message, like
serve's per-message work. mosquitto runs on a fresh 127.0.0.1 port with
either the config `serve --broker auto` writes (``--config tuned``) or the
one it wrote before (``--config before``); its log is searched for
"Outgoing messages are being dropped" and its $SYS dropped counter read.

    python tools/broker_load.py --connections 800 --config before
    python tools/broker_load.py --connections 800 --config tuned --json

Every wait is bounded; mosquitto is stopped by pid.
"""

from __future__ import annotations

import argparse
import json
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from edgeps.transport.broker import free_port, mosquitto_path, wait_listening
from edgeps.transport.broker_tuning import mosquitto_lines, raise_fd_limit

BEFORE = [  # what transport/broker.py wrote before it was sized for thousands
    "persistence false",
    "max_inflight_messages 100",
    "set_tcp_nodelay true",
    "max_queued_messages 10000",
    "message_size_limit 16777216",
]
DROP_LINE = "Outgoing messages are being dropped"


def start_broker(config: str, sensors: int, workdir: Path) -> tuple[Any, int, Path]:
    port = free_port()
    log = workdir / "mosquitto.log"
    # $SYS every 2 s in both, so that the dropped counter is read in time
    body = (
        [*BEFORE, "sys_interval 2"] if config == "before" else mosquitto_lines(sensors)
    )
    conf = workdir / "mosquitto.conf"
    conf.write_text(
        "\n".join(
            [
                f"listener {port} 127.0.0.1",
                "allow_anonymous true",
                "log_dest stderr",
                "log_type error",
                "log_type warning",
                "log_type notice",
                *body,
            ]
        )
        + "\n"
    )
    exe = mosquitto_path()
    if exe is None:
        sys.exit("mosquitto is not installed")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=out
        )
    if not wait_listening("127.0.0.1", port, 15):
        proc.kill()
        sys.exit("mosquitto did not start")
    return proc, port, log


class Host:
    """serve's side: one connection, QoS 1 subscription, a cost per message."""

    def __init__(self, port: int, cost_us: float) -> None:
        self.received = 0
        self.dropped_sys: int | None = None
        self.cost = cost_us / 1e6
        self.ready = threading.Event()
        c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id="load-host",
            protocol=mqtt.MQTTv311,
        )
        c.max_inflight_messages_set(1000)
        c.on_message = self._on_message
        c.on_subscribe = lambda *a: self.ready.set()
        c.connect("127.0.0.1", port, keepalive=20)
        c.loop_start()
        c.subscribe([("load/up/+", 1), ("$SYS/broker/publish/messages/dropped", 0)])
        self.client = c

    def _on_message(self, c: Any, u: Any, msg: Any) -> None:
        if msg.topic.startswith("$SYS"):
            self.dropped_sys = int(msg.payload)
            return
        self.received += 1
        end = time.perf_counter() + self.cost
        while time.perf_counter() < end:
            pass

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def connect_sensors(port: int, n: int, inflight: int) -> list[mqtt.Client]:
    clients = []
    for i in range(n):
        c = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"load-s{i:05d}",
            protocol=mqtt.MQTTv311,
        )
        c.max_inflight_messages_set(inflight)
        c.connect("127.0.0.1", port, keepalive=60)
        clients.append(c)
    return clients


def pump(clients: list[mqtt.Client], until: Any, timeout: float) -> bool:
    """Drive every client's socket from one selector until ``until()`` (bounded)."""
    sel = selectors.DefaultSelector()
    for c in clients:
        sock = c.socket()
        if sock is not None:
            sel.register(sock, selectors.EVENT_READ, c)
    deadline = time.monotonic() + timeout
    last_misc = 0.0
    try:
        while time.monotonic() < deadline:
            for c in clients:
                if c.want_write():
                    c.loop_write()
            for key, _ in sel.select(0.01):
                key.data.loop_read()
            now = time.monotonic()
            if now - last_misc > 1.0:
                for c in clients:
                    c.loop_misc()
                last_misc = now
            if until():
                return True
        return False
    finally:
        sel.close()


def run(args: argparse.Namespace) -> dict[str, Any]:
    fds = raise_fd_limit(args.connections)
    workdir = Path(tempfile.mkdtemp(prefix="edgeps-load-"))
    proc, port, log = start_broker(args.config, args.connections, workdir)
    host = None
    clients: list[mqtt.Client] = []
    try:
        host = Host(port, args.host_cost_us)
        if not host.ready.wait(10):
            sys.exit("no SUBACK for the host")
        clients = connect_sensors(port, args.connections, args.sensor_inflight)
        connacks = [False] * len(clients)
        for i, c in enumerate(clients):
            c.on_connect = lambda cl, u, f, r, p, i=i: connacks.__setitem__(i, True)
        pump(clients, lambda: all(connacks), 60)
        payload = bytes(args.size)
        sent = 0
        t0 = time.monotonic()
        for _ in range(args.rounds):
            infos = [
                c.publish(f"load/up/s{i:05d}", payload, qos=1)
                for i, c in enumerate(clients)
                for _ in range(args.burst)
            ]
            sent += len(infos)
            pump(clients, lambda got=infos: all(x.is_published() for x in got), 60)
            time.sleep(args.period)
        offered_s = time.monotonic() - t0
        # let the host catch up: until all arrived or nothing came for 3 s
        deadline = time.monotonic() + 60
        seen, quiet_since = -1, time.monotonic()
        while host.received < sent and time.monotonic() < deadline:
            if host.received != seen:
                seen, quiet_since = host.received, time.monotonic()
            elif time.monotonic() - quiet_since > 3.0:
                break
            pump(clients, lambda: True, 0.2)
        drained_s = time.monotonic() - t0
        time.sleep(2.5)  # one more $SYS interval for the dropped counter
    finally:
        for c in clients:
            c.disconnect()
            c.loop_write()
        if host is not None:
            host.close()
        proc.terminate()
        proc.wait(10)
    text = log.read_text(errors="replace") if log.exists() else ""
    return {
        "config": args.config,
        "connections": args.connections,
        "connected": sum(connacks),
        "fd_limit": fds,
        "sent": sent,
        "received_by_host": host.received,
        "lost": sent - host.received,
        "sys_dropped": host.dropped_sys,
        "drop_log_lines": text.count(DROP_LINE),
        "offered_s": round(offered_s, 2),
        "drained_s": round(drained_s, 2),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--connections", type=int, default=800)
    p.add_argument("--burst", type=int, default=16, help="messages per sensor/round")
    p.add_argument("--size", type=int, default=1024, help="payload bytes")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--period", type=float, default=1.0, help="s between rounds")
    p.add_argument("--host-cost-us", type=float, default=100.0)
    p.add_argument(
        "--sensor-inflight",
        type=int,
        default=20,
        help="QoS 1 messages a sensor sends before it waits for PUBACKs "
        "(paho's default 20; 0: no limit)",
    )
    p.add_argument("--config", choices=("before", "tuned"), default="tuned")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    result = run(args)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:18} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
