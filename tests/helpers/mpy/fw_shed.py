"""What a built board keeps loaded, under MicroPython: argv config.json.

Builds the worker as main.py does, then prints one "NAME yes|no" line per
check: the run-once code gone (builder, config, constructors), the connect
and join modules loaded only while used, and a link that still works.
"""

import sys

from edgeps_worker import app, mqtt, params_sink, trainer, wire, worker


def say(name, ok):
    print(name, "yes" if ok else "no")


w = app.build(sys.argv[1])
say("builder_unloaded", "edgeps_worker.builder" not in sys.modules)
say("config_unloaded", "edgeps_worker.config" not in sys.modules)
say("worker_init_shed", "__init__" not in worker.Worker.__dict__)
say("client_init_shed", "__init__" not in mqtt.MQTTClient.__dict__)
say("trainer_init_shed", "__init__" not in trainer.KernelTrainer.__dict__)
say("sink_init_shed", "__init__" not in params_sink.ParamsSink.__dict__)
say("topics_shed", not hasattr(wire, "topic_up"))
say("step_kept", "step" in trainer.KernelTrainer.__dict__)
seen = []  # was wire_join (HELLO, BYE) loaded while the client connected?
real_connect = w.t.connect


def connect(*args):
    seen.append("edgeps_worker.wire_join" in sys.modules)
    return real_connect(*args)


w.t.connect = connect
w.start_link()  # connect, subscribe: mqtt_open and worker_link load and go
say("join_apart", seen == [False] and "edgeps_worker.wire_join" not in sys.modules)
say("connected", w.t.connected)
say("open_unloaded", "edgeps_worker.mqtt_open" not in sys.modules)
say("link_unloaded", "edgeps_worker.worker_link" not in sys.modules)
w.leave()
w.start_link()  # a rejoin loads them again
say("reconnected", w.t.connected)
w.leave()
say("left", not w.t.connected)
