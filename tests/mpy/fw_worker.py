"""Run the board worker from a config under MicroPython and report as one JSON line.

argv: config.json deadline_ms [probe]. With "probe", the live heap
(gc.mem_alloc() right after gc.collect()) is sampled around every trainer
step and every transport call, and the peak is reported.
"""

import gc
import json
import sys

import main
from edgeps_worker import clock

start = clock.ticks_ms()
limit = int(sys.argv[2])
probe = len(sys.argv) > 3 and sys.argv[3] == "probe"
peak = [0, ""]


def sample(where):
    gc.collect()
    used = gc.mem_alloc()
    if used > peak[0]:
        peak[0] = used
        peak[1] = where


def timed_out():
    return clock.ticks_diff(clock.ticks_ms(), start) > limit


w = main.build(sys.argv[1], stop=timed_out)
if probe:
    t, trainer = w.t, w.trainer
    step, publish, poll = trainer.step, t.publish, t.poll

    def probed_step():
        sample("step")
        out = step()
        sample("stepped")
        return out

    def probed_publish(topic, payload, qos=1, retain=False):
        sample("publish")
        publish(topic, payload, qos, retain)

    def probed_poll(timeout_ms):
        got = poll(timeout_ms)
        if got is not None:
            sample("polled")
        return got

    trainer.step = probed_step
    t.publish = probed_publish
    t.poll = probed_poll
    sample("built")
reason = w.run()
gc.collect()
report = {
    "reason": reason,
    "stats": w.stats,
    "rejects": w.reject_reasons,
    "incarnation": w.incarnation,
    "clock": w.clock,
    "version": w.version,
    "loss": w.last_loss,
    "peak_live": peak[0],
    "peak_at": peak[1],
    "heap": gc.mem_alloc() + gc.mem_free(),
}
print("REPORT " + json.dumps(report))
