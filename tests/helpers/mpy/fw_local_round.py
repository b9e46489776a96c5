"""A board trainer's local round: argv spec data.epsd h lr scale.bin|- out.bin.

Builds a KernelTrainer over the EPSD file (batch 8, seed 1), sets the
parameters to 0.01 x i mod 7 - 0.03, applies the job's scaler when a file
is named (as a WELCOME's bytes), runs ``local_round.run`` once with h steps
at lr and writes the delta (float32) then the trained parameters to out.bin;
prints "steps", "samples", "loss". Runs unchanged on CPython.
"""

import sys

from edgeps_worker import local_card, local_round
from edgeps_worker.data import FileSource
from edgeps_worker.trainer import KernelTrainer

spec, path, h, lr = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
t = KernelTrainer(spec, FileSource(path, seed=1), batch=8)
for i in range(t.n_params):
    t.params[i] = (i % 7) * 0.01 - 0.03
if sys.argv[5] != "-":
    with open(sys.argv[5], "rb") as f:
        local_card.set_scale(t, f.read())
loss, samples, steps, delta = local_round.run(t, h, 0.0, 0.0, lr)
with open(sys.argv[6], "wb") as f:
    f.write(delta)
    f.write(t.params)
print("steps", steps)
print("samples", samples)
print("loss", repr(loss))
