"""Time the board kernels (best of 5 loss_and_grad calls) under MicroPython.

Not a test: `micropython tests/helpers/mpy/fw_kernel_speed.py` with
MICROPYPATH=firmware.
"""

import time
from array import array

from edgeps_worker.kernels import Model


def bench(spec, batch, reps=5):
    m = Model(spec)
    p = array("f", [((i * 37) % 11 - 5) / 100.0 for i in range(m.n_params)])
    X = array("f", [((i * 13) % 7 - 3) / 3.0 for i in range(m.n_features * batch)])
    classes = m.n_outputs if m.n_outputs > 1 else 2
    y = array("i", [i % classes for i in range(batch)])
    g = array("f", bytes(4 * m.n_params))
    best = None
    for _ in range(reps):
        t = time.ticks_us()
        m.loss_and_grad(p, X, y, batch, g)
        dt = time.ticks_diff(time.ticks_us(), t)
        best = dt if best is None or dt < best else best
    print(f"{spec:<18} batch {batch:>5}  {best / 1000:>8.2f} ms")


bench("logistic:32", 1000)
bench("softmax:64x10", 16)
bench("mlp:64-32-10", 16)
bench("mlp:64-32-10:tanh", 16)
