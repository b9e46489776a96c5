"""QoS 1 publish rate of the firmware MQTT client (run on a board or any Python).

    micropython -m edgeps_worker.bench_publish HOST PORT COUNT PAYLOAD RUNS

prints one line ``rates R1 R2 ...`` (messages per second, one per run). Each
publish returns only after its PUBACK, as the worker loop uses it.
"""

import sys

from edgeps_worker.mqtt import MQTTClient

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


def measure(host, port, count, payload_len, runs, topic="edgeps-bench/fw"):
    """Messages per second of ``runs`` runs of ``count`` QoS 1 publishes each."""
    c = MQTTClient("fwbench-" + sys.implementation.name, host, port, timeout_ms=5000)
    c.connect()
    payload = bytes(payload_len)
    rates = []
    try:
        for _ in range(10):  # warm up the connection and the broker
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
    rates = measure(host, port, count, payload_len, runs)
    print("rates " + " ".join("%.1f" % r for r in rates))


if __name__ == "__main__":
    main(sys.argv[1:])
