"""Run one conv1d case under MicroPython: argv spec n params.bin X.bin y.bin out.bin.

Writes the gradient (float32) to out.bin, then the class probabilities, and
prints the loss, the predicted classes and the step's time (ms).
"""

import sys
import time
from array import array

from edgeps_worker.kernels import net


def load(path, typecode):
    with open(path, "rb") as f:
        return array(typecode, f.read())


spec, n = sys.argv[1], int(sys.argv[2])
m = net(spec)
params = load(sys.argv[3], "f")
X = load(sys.argv[4], "f")
y = load(sys.argv[5], "i")
grad = array("f", bytes(4 * m.n_params))
t0 = time.ticks_us() if hasattr(time, "ticks_us") else 0
loss = m.loss_and_grad(params, X, y, n, grad)
t1 = time.ticks_us() if hasattr(time, "ticks_us") else 0
out = array("f", bytes(4 * n * m.n_outputs))
m.forward(params, X, n, out)
preds = [m.predict_one(params, X, s) for s in range(n)]
with open(sys.argv[6], "wb") as f:
    f.write(grad)
    f.write(out)
print("loss", repr(loss))
print("preds", " ".join(str(p) for p in preds))
print("ms", (t1 - t0) / 1000)
