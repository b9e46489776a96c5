"""A QoS 1 publish to a peer that floods instead of acknowledging; MicroPython too.

Usage: micropython mqtt_flood.py PORT. Prints 'gave-up <reason>' when publish
gave up with an OSError, or 'returned' if it (wrongly) came back normally.
"""

import sys

from edgeps_worker.mqtt import MQTTClient

c = MQTTClient("flood", port=int(sys.argv[1]), timeout_ms=300, retries=1)
c.connect()
try:
    c.publish("edgeps/t/up/w", b"update", 1)
    print("returned")
except OSError as exc:
    print("gave-up", exc.args[-1])
