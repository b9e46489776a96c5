"""Run one kernel case under MicroPython: argv spec n params.bin X.bin y.bin out.bin.

y.bin holds int32 class ids (float32 targets for linear). Writes the gradient
(float32) to out.bin, then the forward outputs, and prints the loss.
"""

import sys
from array import array

from edgeps_worker.kernels_eval import Predictor


def load(path, typecode):
    """A file of little-endian 4-byte values as an array (raw bytes on both Pythons)."""
    with open(path, "rb") as f:
        return array(typecode, f.read())


spec, n = sys.argv[1], int(sys.argv[2])
m = Predictor(spec)
params = load(sys.argv[3], "f")
X = load(sys.argv[4], "f")
y = load(sys.argv[5], "f" if spec.startswith("linear") else "i")
grad = array("f", bytes(4 * m.n_params))
loss = m.loss_and_grad(params, X, y, n, grad)
out = array("f", bytes(4 * n * m.n_outputs))
m.forward(params, X, n, out)
preds = [m.predict_one(params, X, s) for s in range(n)]
with open(sys.argv[6], "wb") as f:
    f.write(grad)
    f.write(out)
print("loss", repr(loss))
print("preds", " ".join(str(p) for p in preds))
