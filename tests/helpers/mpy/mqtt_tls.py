"""The firmware MQTT client over TLS with a password; MicroPython and CPython.

Usage: mqtt_tls.py PORT CA_FILE HOSTNAME USER PASSWORD. Prints 'ok tls' after
a QoS 1 round trip, or 'refused <reason>' when the connection was refused.
"""

import sys

from edgeps_worker.mqtt import MQTTClient
from edgeps_worker.tlsconf import tls_context

port, ca, hostname, user, password = sys.argv[1:6]
c = MQTTClient(
    "tls-" + sys.implementation.name, "127.0.0.1", int(port), user, password,
    timeout_ms=3000, ssl_context=tls_context(ca), server_hostname=hostname,
)  # fmt: skip
try:
    c.connect("edgeps/t/will/tls", b"lost")
except OSError as exc:
    print("refused", exc.args[-1])
    sys.exit(0)
c.subscribe("edgeps/t/tls", 1)
big = bytes(range(256)) * 8
c.publish("edgeps/t/tls", big, 1)
got = None
for _ in range(50):
    got = c.poll(100)
    if got is not None:
        break
c.close()
print("ok tls" if got == ("edgeps/t/tls", big) else "FAIL tls " + repr(got))
