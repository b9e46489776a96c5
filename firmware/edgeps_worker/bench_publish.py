"""QoS 1 publish rate of the firmware MQTT client (run on a board or any Python).

    micropython -m edgeps_worker.bench_publish HOST PORT COUNT PAYLOAD RUNS [split]

prints one line ``rates R1 R2 ...`` (messages per second, one per run). Each
publish returns only after its PUBACK, as the worker loop uses it. With
``split`` the baseline runs instead: each packet in four writes with Nagle
on, the way micropython-lib's umqtt.simple sends it.
"""

import sys

from edgeps_worker.mqtt import MQTTClient
from edgeps_worker.mqtt_link import SocketLink, ticks_ms
from edgeps_worker.mqtt_packets import PUBACK, publish_into, read_varint

try:
    from time import ticks_diff, ticks_us  # type: ignore[attr-defined]
except ImportError:
    from time import perf_counter  # pyright: ignore[reportAttributeAccessIssue]

    def ticks_us():
        """Microseconds from an arbitrary origin."""
        return int(perf_counter() * 1e6)

    def ticks_diff(a, b):
        """a - b."""
        return a - b


def _nagle_link(host, port, timeout_ms):
    link = SocketLink(host, port, timeout_ms)
    link.sock.setsockopt(6, 1, 0)  # TCP_NODELAY off: Nagle on
    return link


class SplitWriteClient(MQTTClient):
    """Baseline only: header, topic, packet id and payload as separate writes."""

    def publish(self, topic, payload, qos=1, retain=False):
        pid = self._next_pid()
        buf, n = publish_into(bytearray(0), topic, payload, 1, retain, pid)
        mv = memoryview(buf)[:n]
        hdr = read_varint(buf, 1, n)
        start = hdr[1] if hdr else 2
        cut = start + 2 + (buf[start] << 8 | buf[start + 1])
        for part in (mv[:start], mv[start:cut], mv[cut : cut + 2], mv[cut + 2 :]):
            self._send(part)
        if self._wait_for(PUBACK, pid, ticks_ms(), self.timeout_ms) is None:
            self._dead("no PUBACK")


def measure(host, port, count, payload_len, runs, topic="edgeps-bench/fw", split=False):
    """Messages per second of ``runs`` runs of ``count`` QoS 1 publishes each."""
    name = "fwbench-" + sys.implementation.name
    cls = SplitWriteClient if split else MQTTClient
    opener = _nagle_link if split else SocketLink
    c = cls(name, host, port, timeout_ms=5000, opener=opener)
    c.connect()
    payload = bytes(payload_len)
    rates = []
    try:
        for _ in range(2 if split else 10):  # warm up the connection and the broker
            c.publish(topic, payload, 1)
        for _ in range(runs):
            t0 = ticks_us()
            for _ in range(count):
                c.publish(topic, payload, 1)
            dt = ticks_diff(ticks_us(), t0)
            rates.append(count * 1e6 / max(1, dt))
    finally:
        c.close()
    return rates


def main(argv):
    host = argv[0]
    port, count, payload_len, runs = [int(a) for a in argv[1:5]]
    split = len(argv) > 5 and argv[5] == "split"
    rates = measure(host, port, count, payload_len, runs, split=split)
    print("rates " + " ".join("%.1f" % r for r in rates))


if __name__ == "__main__":
    main(sys.argv[1:])
