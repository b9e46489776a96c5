"""`edgeps bench links`: bytes through a shaped link against the bound bytes * 8 / rate.

Starts a mosquitto, puts one client behind the shaping proxy (the one
`edgeps emulate --link-rate` uses) and one directly on the broker, and times
QoS1 transfers of the same payload up (shaped -> broker -> plain), down
(plain -> broker -> shaped) and unshaped (plain -> plain). A ratio near 1
means the proxy holds the link to its rate; below ~0.95 it leaks.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from edgeps.netem.flags import add_link_flags
from edgeps.netem.shaper import ShapingProxy
from edgeps.netem.shaping import LinkShape
from edgeps.netem.units import format_rate
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bytes", type=int, default=32 * 1024, help="payload (default 32768)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="per direction")
    add_link_flags(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def _client(url: str, cid: str) -> MqttLink:
    link = MqttLink(ConnectionOptions(url), cid, publish_timeout=120.0)
    link.connect()
    return link


def _transfer(sender: MqttLink, receiver: MqttLink, topic: str, data: bytes) -> float:
    receiver.subscribe(topic, qos=1)
    t0 = time.monotonic()
    sender.publish(topic, data, qos=1)
    deadline = t0 + 120
    while time.monotonic() < deadline:
        got = receiver.poll(200)
        if got is not None and got[0] == topic:
            return time.monotonic() - t0
    raise OSError(f"no message on {topic} within 120 s")


def measure(nbytes: int, shape: LinkShape, repeats: int) -> list[dict[str, Any]]:
    """One row per direction: median seconds, the rate bound and their ratio."""
    from edgeps.transport.broker import start_mosquitto

    payload = bytes(range(256)) * (nbytes // 256) + bytes(nbytes % 256)
    times: dict[str, list[float]] = {"up": [], "down": [], "unshaped": []}
    with start_mosquitto() as broker:
        proxy = ShapingProxy(broker.host, broker.port).start()
        try:
            port = proxy.add("bench", up=shape, down=shape)
            shaped = _client(f"mqtt://127.0.0.1:{port}", "bench-shaped")
            plain = _client(broker.url, "bench-plain")
            try:
                for i in range(repeats):
                    times["up"].append(_transfer(shaped, plain, f"b/u{i}", payload))
                    times["down"].append(_transfer(plain, shaped, f"b/d{i}", payload))
                    fast = _transfer(plain, plain, f"b/f{i}", payload)
                    times["unshaped"].append(fast)
            finally:
                shaped.close()
                plain.close()
        finally:
            proxy.close()
    bound = nbytes * 8 / shape.rate if shape.rate > 0 else 0.0
    rows = []
    for direction, ts in times.items():
        med = statistics.median(ts)
        limit = bound if direction != "unshaped" else 0.0
        rows.append({
            "direction": direction, "bytes": nbytes, "median_s": round(med, 4),
            "bound_s": round(limit, 4),
            "ratio": round(med / limit, 3) if limit > 0 else None,
        })  # fmt: skip
    return rows


def run(args: argparse.Namespace) -> int:
    rate = args.link_rate if args.link_rate is not None else 250e3
    delay = args.link_delay if args.link_delay is not None else 0.02
    loss = args.link_loss if args.link_loss is not None else 0.0
    if args.bytes < 1 or args.repeat < 1:
        print("edgeps bench links: --bytes and --repeat must be >= 1", file=sys.stderr)
        return 2
    try:
        rows = measure(args.bytes, LinkShape(rate, delay, loss), args.repeat)
    except (OSError, RuntimeError) as exc:
        print(f"edgeps bench links: {exc}", file=sys.stderr)
        return 1
    if args.json:
        link = {"rate": rate, "delay": delay, "loss": loss}
        print(json.dumps({"link": link, "repeats": args.repeat, "rows": rows}))
        return 0
    print(
        f"link {format_rate(rate)}, {delay * 1000:g} ms one way, loss {loss:g}; "
        f"medians of {args.repeat}"
    )
    print(f"{'direction':10s} {'bytes':>8s} {'median_s':>9s} {'bound_s':>8s} ratio")
    for r in rows:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        print(
            f"{r['direction']:10s} {r['bytes']:8d} {r['median_s']:9.4f} "
            f"{r['bound_s']:8.4f} {ratio}"
        )
    return 0
