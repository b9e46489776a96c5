"""A worker's part of the job's WELCOME: local rounds, the scaler, the classes.

Loaded only by a job whose WELCOME carries them (PROTOCOL.md, "WELCOME"),
so a board of a job without them carries none of this code. ``card``
takes them from the WELCOME. ``run`` keeps
the released parameters in one more parameter-sized buffer (the *anchor*,
taken once and kept, in pieces of ``PIECE`` floats: a heap that training
left fragmented has no hole for one n_params array), takes plain SGD steps
at the job's lr on the trainer's own parameter buffer, and leaves
``anchor - params`` (what the PS applies as a pseudo-gradient) in the
gradient buffer, where ``encode_grad`` finds it. ``set_scale`` (from
``scaled``) puts a ``Scaled`` source in front of the trainer's.
"""

import gc
from array import array

from edgeps_worker import clock

PIECE = 256  # floats per piece of the anchor (1 KB)


class Anchor:
    """n float32 in pieces of ``PIECE`` (``parts``): a copy of the release."""

    def __init__(self, n):
        self.parts = [array("f", bytes(4 * min(PIECE, n - o)))
                      for o in range(0, n, PIECE)]  # fmt: skip
        self.n = n

    def __len__(self):
        return self.n

    def keep(self, p):
        """Copy the n floats of ``p`` in."""
        src, o = memoryview(p), 0
        for part in self.parts:
            m = len(part)
            memoryview(part)[:] = src[o : o + m]
            o += m

    def delta(self, p, g):
        """``g = anchor - p``, element by element."""
        o = 0
        for part in self.parts:
            for i in range(len(part)):
                g[o + i] = part[i] - p[o + i]
            o += len(part)


def card(w, head, body):
    """Adopt a WELCOME's local rounds, scaler and class names for worker ``w``
    (``head``: its body head; ``body``: the rest). False, with a stop reason,
    when this worker cannot train the job as it asks."""
    h, e, s, lr, ns, sl = head
    t = w.trainer
    if sl + 8 * ns > len(body) or not (e >= 0 and s >= 0 and lr >= 0):
        w.count_bad("welcome")
        return False
    local = h > 1 or e > 0 or s > 0
    try:
        scale = bytes(body[sl : sl + 8 * ns]) if ns else None
        if hasattr(t, "set_scale"):  # CPython trainers
            t.set_scale(scale)
        elif scale is not None or hasattr(getattr(t, "source", None), "s"):
            set_scale(t, scale)
    except ValueError as x:
        w.note("job scaler: " + str(x))
        w.stop_reason = "model_mismatch"
        return False
    # instance attributes only once a job has them (Worker._release)
    if local or hasattr(w, "local"):
        w.local = (h, e, s, lr) if local else None
        if local:
            w.note("local rounds: " + str(h) + " steps, " + str(e) + " epochs, "
                   + str(s) + " s at lr " + str(lr))  # fmt: skip
    names = bytes(body[sl + 8 * ns :]) or None
    if names or hasattr(w, "classes"):
        w.classes = names  # the job's class names, one per line
    if hasattr(t, "set_classes"):  # CPython workers reading text labels
        try:
            t.set_classes(names)
        except ValueError as x:
            w.note("job classes: " + str(x))
            w.stop_reason = "model_mismatch"
            return False
    return True


def round(t, local):
    """A local round of trainer ``t`` with the WELCOME's (steps, epochs,
    seconds, lr): its own ``local_round`` (CPython trainers), else ``run``."""
    own = getattr(t, "local_round", None)
    return own(*local) if own is not None else run(t, *local)


def plan(h, epochs, rows, batch):
    """Steps of one round: ``epochs`` passes over ``rows`` (when both are
    known and > 0), else ``h``; at least one."""
    if epochs > 0 and rows > 0:
        n = epochs * rows / max(1, batch)
        h = int(n) + (1 if n > int(n) else 0)
    return h if h > 1 else 1


def run(t, h, epochs, seconds, lr):
    """(mean loss, samples, steps, delta) of one local round of trainer ``t``
    (a ``trainer.KernelTrainer``: ``params``, ``grad``, ``step()``). A round
    that ends after one step returns that step's gradient (steps 1), which
    the PS applies as any gradient."""
    p, g = t.params, t.grad
    n = len(p)
    a = getattr(t, "anchor", None)
    if a is None:
        gc.collect()
        a = t.anchor = Anchor(n)
    a.keep(p)
    count = getattr(t.source, "count", None)
    h = plan(h, epochs, count() if count else 0, t.batch)
    t0 = clock.ticks_ms()
    k = samples = 0
    total = 0.0
    while True:
        loss, m, _ = t.step()
        k += 1
        samples += m
        total += loss * m
        if seconds > 0:
            done = clock.ticks_diff(clock.ticks_ms(), t0) >= seconds * 1000
        else:
            done = k >= h
        if done and k == 1:
            return loss, m, 1, g  # one step: its gradient, pushed as one
        for i in range(n):
            p[i] -= lr * g[i]
        if done:
            break
    a.delta(p, g)
    return (total / samples if samples else float("nan")), samples, k, g


def set_scale(t, data):
    """``scaled.set_scale``: that module loads only for a job with a scaler."""
    from edgeps_worker import scaled

    scaled.set_scale(t, data)
