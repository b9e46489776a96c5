"""The job's model kept on flash when the job is done; then, maybe, predicting with it.

A worker that gets STOP done holds the model of its last complete release:
the parameter buffer when no chunk of a later release has landed in it
since and no local round moved it (the PS sends every worker a final
release just before STOP done, which starts no step, PROTOCOL.md); else,
with local rounds, the trainer's ``anchor`` (``local_round.run`` copies
each release there before it moves the parameters). It is written in the
format ``predict.py`` loads (firmware/README.md, "The model file"), with
the job's class names and scaler from its WELCOME.

``app.main`` hands every run's end to ``finish`` (loaded only then, so a
training board's heap never holds this code). At a job's end the config's
``on_done`` says what follows: ``predict`` (the default) keeps the model
and, with a sensor, goes on predicting each reading with it
(``edgeps_worker.infer``, through a soft reset on a board; a restart does
the same, with no host); ``keep`` keeps it and ends; ``stop`` keeps
nothing. The CPython worker writes its ``--model-out`` with ``save`` and
``model_of`` too, and ``edgeps_worker.fetch`` its fetched model with
``save``.
"""

import gc
import json
import os
import struct
import sys
from binascii import crc32

from edgeps_worker import unload

HEADER = "<4sBBHIHH"  # predict.HEADER: magic, version, flags, sizes
ON_DONE = ("predict", "keep", "stop")


def released(w):
    """The buffer holding worker ``w``'s last complete release, or None."""
    t = w.trainer
    s = w.sink
    d = s.done  # the release last used (None: none since the last HELLO)
    # nothing filled the buffer since: an own release leaves version -1, a
    # used shared copy stays held under its version and seq -1
    clean = d is not None and (
        s.version == -1 or (s.seq == -1 and s.version == d[0] and not s.left)
    )
    local = getattr(w, "local", None) is not None
    # the job's final release starts no step (Worker._on_params) and a
    # release without local rounds none that moves the parameters
    if clean and d is not None and (not local or not d[1] and w.model_state == "done"):
        return t.params_buffer()
    return getattr(t, "anchor", None) if local else None  # the last round's start


def model_of(w):
    """(spec, class names (bytes, one a line) or None, scaler (offsets then
    inverse stds, float32) or None, parameters or None) of worker ``w``."""
    t = w.trainer
    scale = getattr(t, "scale", None)  # what a CPython trainer kept of WELCOME
    if scale is None:  # a board's: the Scaled source in front of its data
        scale = getattr(getattr(t, "source", None), "s", None)
    return t.model, getattr(w, "classes", None), scale, released(w)


def save(path, spec, names, params, scale=None):
    """Write a model file: ``params`` (n float32, or a ``local_round.Anchor``),
    ``scale`` (2 x n_features
    float32, as an array or the WELCOME's bytes, or None), ``names`` (bytes,
    one name a line, or None). Written to ``path`` + ".new" first, then
    renamed over it: a reset while writing leaves the old file whole."""
    if isinstance(names, str):
        names = names.encode()
    parts = bytes(names).split(b"\n") if names else []
    n = len(params)
    nf = _features(spec)
    tmp = path + ".new"
    with open(tmp, "wb") as f:
        spec_b = spec.encode()
        # version 2: a CRC-32 of every byte follows them (predict.Model checks it)
        crc = _put(f, struct.pack(HEADER, b"EPSM", 2, 1 if scale is not None else 0,
                                  len(spec_b), n, nf, len(parts)), 0)  # fmt: skip
        crc = _put(f, spec_b, crc)
        for p in parts:
            if len(p) > 255:
                raise ValueError("class names must be at most 255 bytes")
            crc = _put(f, bytes((len(p),)), crc)
            crc = _put(f, p, crc)
        # float32: little-endian on boards and hosts alike; a local round's
        # anchor is in pieces
        for part in getattr(params, "parts", (params,)):
            crc = _put(f, memoryview(part), crc)
        if scale is not None:
            crc = _put(f, scale, crc)
        f.write(struct.pack("<I", crc & 0xFFFFFFFF))
    try:
        os.rename(tmp, path)  # replaces path (MicroPython's VFS, POSIX)
    except OSError:
        os.remove(path)
        os.rename(tmp, path)


def _put(f, data, crc):
    f.write(data)
    return crc32(data, crc)


def _features(spec):
    if spec.startswith("conv"):  # conv1d:<C>x<L>-...: a window of C * L floats
        c, n = spec.split(":")[1].split("-")[0].split("x")[:2]
        return int(c) * int(n)
    return int(spec.split(":")[1].replace("x", "-").split("-")[0])


def exists(path):
    try:
        os.stat(path)
        return True
    except OSError:
        return False


def settings(argv):
    """(on_done, model_file, sensor) of the config named by ``argv``."""
    with open(argv[1] if len(argv) > 1 else "config.json") as f:
        raw = json.load(f)
    on = raw.get("on_done", ON_DONE[0])
    return on, raw.get("model_file", "model.bin"), raw.get("sensor", "")


def finish(ws, argv):
    """The end of ``app.main``'s run at its job's end (done): keep its model
    as the config's on_done says, and maybe predict with it from now on.
    ``ws``: a list holding the Worker (or inference runner), emptied here,
    so that nothing holds it (nor its code) once the board predicts. The
    exit status."""
    return predict(argv) if end(ws.pop(), argv) else 0


def end(w, argv):
    """True when the board goes on predicting, after worker ``w``'s job's
    model was kept (app.main said why it stopped)."""
    if getattr(w, "sink", None) is None:  # an inference runner's end
        return False
    on, path, sensor = settings(argv)
    if on not in ON_DONE or on == ON_DONE[2]:
        return False
    spec, names, scale, params = model_of(w)
    if params is None:
        print("edgeps worker: no complete release to keep; " + path + " unchanged")
    else:
        gc.collect()
        try:
            save(path, spec, names, params, scale)
            print("edgeps worker: kept the job's model in " + path)
        except OSError as exc:  # a full flash: the board still did its job
            print("edgeps worker: cannot write " + path + ": " + str(exc))
    return on == ON_DONE[0] and bool(sensor) and exists(path)


def predict(argv):
    """Predict with the kept model from now on, as a restart would: the
    builder finds it at start. On a board that is a soft reset (boot.py and
    main.py run again, with the whole heap: training left it fragmented);
    where there is an operating system (the unix port, CPython) every module
    training loaded is dropped and ``app.main`` runs again in this process."""
    if sys.platform not in ("linux", "darwin", "win32"):
        import machine  # type: ignore[import-not-found]

        machine.soft_reset()
    for name in [k for k in sys.modules if k.startswith("edgeps_worker.")]:
        if name != "edgeps_worker.keep":
            unload(name[14:])
    gc.collect()
    from edgeps_worker import app

    return app.main(argv)
