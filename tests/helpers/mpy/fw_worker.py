"""Run the board worker from a config under MicroPython and report as one JSON line.

argv: config.json limit_ms. The worker stops by itself (max_iterations, job
done) or when limit_ms have passed.
"""

import json
import sys

from edgeps_worker import app, clock

start = clock.ticks_ms()
limit = int(sys.argv[2])


def timed_out():
    return clock.ticks_diff(clock.ticks_ms(), start) > limit


w = app.build(sys.argv[1], stop=timed_out)
reason = w.run()
if hasattr(w.trainer, "close"):
    w.trainer.close()
report = {
    "reason": reason,
    "stats": w.stats,
    "rejects": w.reject_reasons,
    "instance": w.instance,
    "session": w.session,
    "clock": w.clock,
    "version": w.version,
    "loss": w.last_loss,
}
print("REPORT " + json.dumps(report))
