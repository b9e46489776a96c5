"""The end of a board's run: why it stopped and, at its job's end, the model kept.

``app.main`` loads this module only once the worker's run is over, so a
training board's heap holds none of it. Only a job's end (done) loads
``keep``. Before it loads, what no step or push needs any more is let go:
the codec's residual, the gradient, the network and its code, the MQTT
client (its link is closed) and its code. ``keep`` interns names, and past
620 names MicroPython takes its next table of names in one block (640
names, about 7 KB on the 64-bit unix port; its MemoryError then says
"allocating 640 bytes", the count of names): a conv board's fragmented
training heap had no such hole. The names here are ones a board has
interned already.
"""

import gc
import json

from edgeps_worker import unload


def run(ws, argv, reason):
    """Say why the run of the worker in list ``ws`` stopped (``stopped:
    <reason> <stats>``); at done keep its model (``keep.finish``, which
    empties ``ws``). The exit status."""
    w = ws[0]
    if reason == "memory":
        print("edgeps worker: out of memory; try a smaller max_chunk, batch or model")
    print("stopped: " + reason + " " + json.dumps(w.stats))
    if reason != "done":
        return 0 if reason in ("iterations", "stopped") else 1
    t = w.trainer
    t.codec = t.grad = t.net = w._grad = w.t = None
    t = w = None
    for name in ("conv", "convk", "blockfp", "kernels", "mqtt", "mqtt_link",
                 "mqtt_packets", "mqtt_whole"):  # fmt: skip
        unload(name)
    gc.collect()
    try:
        from edgeps_worker import keep
    except MemoryError as exc:  # one line, not a traceback
        print("edgeps worker: out of memory to keep the job's model: " + str(exc))
        return 1
    return keep.finish(ws, argv)
