"""Firmware MQTT client against a real broker; runs under MicroPython (and CPython).

Usage: micropython mqtt_scenarios.py PORT SCENARIO...  (roundtrip, retained,
will, reconnect). Prints 'ok NAME' for each scenario that passed.
"""

import sys

from edgeps_worker.mqtt import MQTTClient
from edgeps_worker.mqtt_link import sleep_ms, ticks_diff, ticks_ms

PORT = int(sys.argv[1])


def client(name, **kw):
    return MQTTClient(
        name + "-" + sys.implementation.name, port=PORT, timeout_ms=2000, **kw
    )


def wait_for(c, topic, budget_ms=5000):
    for _ in range(budget_ms // 100):
        got = c.poll(100)
        if got is not None and got[0] == topic:
            return got[1]
    return None


def roundtrip():
    c = client("rt")
    c.connect("edgeps/t/will/rt", b"lost")
    c.subscribe("edgeps/t/echo", 1)
    c.subscribe("edgeps/t/echo0", 0)
    big = bytes(range(256)) * 20  # multi-byte remaining length both ways
    c.publish("edgeps/t/echo", big, 1)
    got1 = wait_for(c, "edgeps/t/echo")
    c.publish("edgeps/t/echo0", b"q0", 0)
    got0 = wait_for(c, "edgeps/t/echo0")
    c.close()
    return got1 == big and got0 == b"q0"


def retained():
    a = client("ra")
    a.connect()
    a.publish("edgeps/t/model", b"v7", 1, True)
    a.close()
    b = client("rb")
    b.connect()
    b.subscribe("edgeps/t/model", 1)
    got = wait_for(b, "edgeps/t/model")
    b.close()
    return got == b"v7"


def will():
    watcher = client("ww")
    watcher.connect()
    watcher.subscribe("edgeps/t/up/w1", 1)
    dying = client("wd")
    dying.connect("edgeps/t/up/w1", b"lost")
    dying.close_link()  # the socket dies without DISCONNECT
    got = wait_for(watcher, "edgeps/t/up/w1")
    watcher.close()
    return got == b"lost"


def reconnect():
    # the worker loop's way: on OSError connect again and resubscribe
    c = client("rc")
    c.connect("edgeps/t/will/rc", b"lost")
    c.subscribe("edgeps/t/rc", 1)
    c.publish("edgeps/t/rc", b"before", 1)
    if wait_for(c, "edgeps/t/rc") != b"before":
        return False
    print("ready")
    reconnects = 0
    # bounded in time, not in rounds: with the broker still up a round takes a
    # millisecond or two, and the test may take longer than 300 of them to
    # stop the broker
    deadline = ticks_ms() + 40000
    while ticks_diff(deadline, ticks_ms()) > 0:
        try:
            if not c.connected:
                c.connect("edgeps/t/will/rc", b"lost")
                c.subscribe("edgeps/t/rc", 1)
                reconnects += 1
            c.publish("edgeps/t/rc", b"after", 1)
            got = wait_for(c, "edgeps/t/rc", 200)
        except OSError:
            c.close_link()
            sleep_ms(50)
            continue
        if reconnects >= 1 and got == b"after":
            c.close()
            return True
    return False


for name in sys.argv[2:]:
    scenarios = {"roundtrip": roundtrip, "retained": retained, "will": will}
    scenarios["reconnect"] = reconnect
    ok = scenarios[name]()
    print(("ok " if ok else "FAIL ") + name)
