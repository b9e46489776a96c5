"""A trained model on the board: load ``model.bin``, predict one reading at a time.

The file is the one ``edgeps export CHECKPOINT --format micropython`` writes
(its byte layout is in firmware/README.md, "The model file"). It is read a
field at a time: the parameters go straight from the file into one
``array('f')``, so loading takes the model's size in heap and little more.
A reading is scaled as the host scaled its training data, then run through
the board's own forward pass (``kernels_eval.Predictor``)::

    from edgeps_worker.predict import load
    model = load("model.bin")
    index, name = model.predict(reading)  # a class id and its name

A linear model gives its value and the name "". A training board never
imports this module.
"""

import gc
import struct
from array import array

MAGIC = b"EPSM"
HEADER = "<4sBBHIHH"
HEADER_LEN = 16
FLAG_SCALER = 1


def _floats(f, n):
    """n float32 read from file f into a new array('f'), with no copy in between."""
    a = array("f", range(n))  # sized from the range: no n-byte temporary
    if f.readinto(memoryview(a)) != 4 * n:
        raise ValueError("model file ends early")
    return a


class Model:
    """A loaded model: spec, class names, parameters, scaler and scratch."""

    def __init__(self, path):
        with open(path, "rb") as f:
            head = f.read(HEADER_LEN)
            if len(head) != HEADER_LEN:
                raise ValueError(path + ": not an edgeps model file")
            magic, version, flags, n_spec, n_params, nf, n_names = struct.unpack(
                HEADER, head
            )
            if magic != MAGIC or version != 1:
                raise ValueError(path + ": not an edgeps model file (EPSM v1)")
            self.spec = f.read(n_spec).decode()
            names = []
            for _ in range(n_names):
                names.append(f.read(f.read(1)[0]).decode())
            self.names = names
            # the largest block first, while the heap is least fragmented
            gc.collect()
            self.params = _floats(f, n_params)
            self.mean = self.scale = None
            if flags & FLAG_SCALER:
                self.mean = _floats(f, nf)
                self.scale = _floats(f, nf)
        if self.spec.startswith("conv"):
            from edgeps_worker.conv import ConvNet as Predictor
        else:
            from edgeps_worker.kernels_eval import Predictor

        self.net = Predictor(self.spec, 1)
        if self.net.n_params != n_params or self.net.n_features != nf:
            raise ValueError(path + ": sizes do not match " + self.spec)
        self.n_features = nf
        self.linear = self.spec.startswith("linear:")
        self.x = array("f", range(nf))  # the scaled reading

    def predict(self, x):
        """(class id, class name) of one reading x (n_features numbers), or
        (value, "") for a linear model; a class without names is named by its id."""
        nf, xs = self.n_features, self.x
        if len(x) != nf:
            raise ValueError("a reading needs " + str(nf) + " features")
        mean, scale = self.mean, self.scale
        if mean is None or scale is None:
            for i in range(nf):
                xs[i] = x[i]
        else:
            for i in range(nf):
                xs[i] = (x[i] - mean[i]) * scale[i]
        out = self.net.predict_one(self.params, xs, 0)
        if self.linear:
            return out, ""
        k = int(out)
        return k, self.names[k] if self.names else str(k)


_default = None


def load(path="model.bin"):
    """The model in file ``path``."""
    return Model(path)


def predict(x, path="model.bin"):
    """(class id or value, name) of reading x by the model in ``path``, loaded once."""
    global _default
    if _default is None:
        _default = Model(path)
    return _default.predict(x)
