"""Reconnect delays of the worker loop, under MicroPython or CPython.

A scripted link (argv: a plan like "ffftfft": f a refused connect, t a
connect that comes up and drops at once) drives ``Worker.run``; the script
prints one line, the delays the worker announced before each reconnect, as
JSON. The worker's backoff is 10 ms doubling to 1000 ms.
"""

import json
import sys

from edgeps_worker.ring import RingBuffer
from edgeps_worker.trainer import KernelTrainer
from edgeps_worker.worker import Worker


class ScriptedLink:
    """A transport whose connects follow the plan; an up link drops when polled."""

    def __init__(self, plan):
        self.plan = list(plan)
        self.connected = False

    def connect(self, will_topic, will_payload):
        if self.plan.pop(0) == "f":
            raise OSError(111, "refused")
        self.connected = True

    def subscribe(self, topic, qos=1):
        pass

    def poll(self, timeout_ms):
        self.connected = False
        raise OSError(104, "dropped")

    def publish(self, topic, payload, qos=1, retain=False):
        raise OSError(104, "not connected")

    def close(self):
        self.connected = False


link = ScriptedLink(sys.argv[1])
ring = RingBuffer(4, 3, seed=1)
for i in range(4):
    ring.add([0.5, -0.5, float(i)], i % 2)
delays = []


def log(text):
    if "reconnecting in " in text:
        delays.append(int(text.split("reconnecting in ")[1].split()[0]))


w = Worker(link, KernelTrainer("logistic:3", ring, batch=2), "job", "w1",
           backoff_min_ms=10, backoff_max_ms=1000, stop=lambda: not link.plan,
           log=log)  # fmt: skip
w.run()
print(json.dumps(delays))
