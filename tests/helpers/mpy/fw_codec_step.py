"""The board worker's heap around training steps with each codec: argv config codes.

Builds the worker as main.py does (app.build: buffers, config, data, MQTT
client, worker; not connected), then for each code of argv[2] (comma list,
e.g. "1,2,3") runs 3 steps, each a gradient then ``encode_grad`` with the
encoded body kept alive as the push does, sampling the live heap (after a
collection) after building, after each step and after each encoding. Prints
"built <bytes>" and "peak <code> <bytes>" per code (the largest sample of its
steps). argv[3]: how I8 keeps its residual (f32, i8; the trainer's default).
"""

import gc
import sys

from edgeps_worker import app


def live():
    gc.collect()
    return gc.mem_alloc()


w = app.build(sys.argv[1])
t = w.trainer
print("built", live())
if len(sys.argv) > 3:  # how I8 keeps its residual (the trainer's default else)
    t.residual = sys.argv[3]
for text in sys.argv[2].split(","):
    code = int(text)
    peak = 0
    for _ in range(3):
        t.step()
        peak = max(peak, live())
        # as the worker pushes: F32 is the gradient itself, others encode_grad
        body = t.grad if code == 1 else t.encode_grad(code, 0)
        peak = max(peak, live())
        body = None
    print("peak", code, peak)
