"""A worker's local rounds: steps on its own parameters, the delta pushed.

Loaded only by a job whose WELCOME asks for them (PROTOCOL.md, "WELCOME"),
so a board of a job without them carries none of this code; the WELCOME's
card (local rounds, scaler, classes) is read by ``local_card``, off the
heap again before the first round. ``run`` keeps
the released parameters in one more parameter-sized buffer (the *anchor*,
taken once and kept, in pieces of ``PIECE`` floats: a heap that training
left fragmented has no hole for one n_params array), takes plain SGD steps
at the job's lr on the trainer's own parameter buffer, and leaves
``anchor - params`` (what the PS applies as a pseudo-gradient) in the
gradient buffer, where ``encode_grad`` finds it.
"""

import gc
from array import array

from edgeps_worker import clock

PIECE = 256  # floats per piece of the anchor (1 KB)
SMALLEST = 32  # floats of its smallest piece (128 B)


class Anchor:
    """n float32 in pieces of ``PIECE`` (``parts``): a copy of the release."""

    def __init__(self, n):
        # each piece from a range (no temporary next to it); where no hole of
        # PIECE floats is left, halves of it, down to SMALLEST: a heap
        # training fragmented has room in holes smaller than a piece
        parts, o, m = [], 0, PIECE
        while o < n:
            try:
                parts.append(array("f", range(min(m, n - o))))
            except MemoryError:
                if m <= SMALLEST:
                    raise
                m //= 2
                continue
            o += len(parts[-1])
        self.parts = parts
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
