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

A version 2 file ends in a CRC-32 of its bytes, checked as they are read
(no second pass, no copy); a version 1 file has none. Every fault (a damaged,
truncated or inconsistent file, parameters that are not finite) is a
ValueError naming the file.
"""

import gc
import struct
from array import array
from binascii import crc32

MAGIC = b"EPSM"
HEADER = "<4sBBHIHH"
HEADER_LEN = 16
FLAG_SCALER = 1


def _floats(f, n, left):
    """n float32 read from file f into a new array('f'), with no copy in between;
    ``left`` is the bytes the file has from here (a damaged count that asks for
    more is refused before anything is allocated)."""
    if 4 * n > left:
        raise ValueError("it ends early")
    a = array("f", range(n))  # sized from the range: no n-byte temporary
    if f.readinto(memoryview(a)) != 4 * n:
        raise ValueError("it ends early")
    for v in a:
        if v != v or v - v != 0:  # NaN, or inf (inf - inf is NaN)
            raise ValueError("its numbers are not all finite (NaN or inf)")
    return a


def _read(f, n, crc):
    b = f.read(n)
    if len(b) != n:
        raise ValueError("it ends early")
    return b, crc32(b, crc)


class Model:
    """A loaded model: spec, class names, parameters, scaler and scratch."""

    def __init__(self, path):
        try:
            spec, names, params, mean, scale, nf = _load(path)
            if spec.startswith("conv"):
                from edgeps_worker.conv import ConvNet as Predictor
            else:
                from edgeps_worker.kernels_eval import Predictor

            net = Predictor(spec, 1)
            if net.n_params != len(params) or net.n_features != nf:
                raise ValueError("sizes do not match " + spec)
        except (ValueError, IndexError, UnicodeError) as exc:
            raise ValueError(path + ": not a usable model file: " + str(exc)) from None
        self.spec, self.names, self.net = spec, names, net
        self.params, self.mean, self.scale = params, mean, scale
        self.n_features = nf
        self.linear = spec.startswith("linear:")
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


def _load(path):
    """(spec, names, params, mean, scale, n_features) of a model file, its
    checksum (version 2) checked along the way."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        head, crc = _read(f, HEADER_LEN, 0)
        magic, version, flags, n_spec, n_params, nf, n_names = struct.unpack(
            HEADER, head
        )
        if magic != MAGIC or version not in (1, 2):
            raise ValueError("not an edgeps model file (EPSM v1-v2)")
        spec, crc = _read(f, n_spec, crc)
        names = []
        for _ in range(n_names):
            n, crc = _read(f, 1, crc)
            name, crc = _read(f, n[0], crc)
            names.append(name.decode())
        # the largest block first, while the heap is least fragmented
        gc.collect()
        params = _floats(f, n_params, size - f.tell())
        crc = crc32(params, crc)
        mean = scale = None
        if flags & FLAG_SCALER:
            mean = _floats(f, nf, size - f.tell())
            scale = _floats(f, nf, size - f.tell())
            crc = crc32(scale, crc32(mean, crc))
        tail = f.read(5)
    if version == 2 and (
        len(tail) != 4 or struct.unpack("<I", tail)[0] != crc & 0xFFFFFFFF
    ):
        raise ValueError("checksum mismatch: the file is damaged")
    if version == 1 and tail:
        raise ValueError("bytes after its end")
    return spec.decode(), names, params, mean, scale, nf


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
