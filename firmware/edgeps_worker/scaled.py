"""The job's scaler on a board: a ``Scaled`` source in front of the trainer's.

Its own small module: a board whose WELCOME carries a scaler and nothing
else of ``local_card`` (local rounds, class names) loads only this
(``card``), and keeps only this while it trains (a window model's first
connect is its tightest moment in the heap).
"""

from array import array


class Scaled:
    """A data source whose rows come out standardised by the job's scaler
    (``s``: array('f') of n_features offsets, then as many inverse stds)."""

    def __init__(self, source, s):
        self.source, self.s = source, s
        self.n_features = source.n_features
        self.draw = source.draw
        self.count = getattr(source, "count", None)

    def rows(self, X, y, m):
        got = self.source.rows(X, y, m)
        s, nf = self.s, self.n_features
        for r in range(m):
            b = r * nf
            for j in range(nf):
                X[b + j] = (X[b + j] - s[j]) * s[nf + j]
        return got


def set_scale(t, data):
    """A KernelTrainer's scaler from WELCOME bytes (None: raw features);
    ValueError when it is not the model's size."""
    src = getattr(t, "source", None)
    if src is None:
        if data is None:
            return
        raise ValueError("this trainer takes no scaler")
    if hasattr(src, "s"):  # a Scaled (maybe of an earlier load of this module)
        src = src.source
    if data is None:
        t.source = src
        return
    if len(data) != 8 * src.n_features:
        raise ValueError("the job's scaler does not fit this model")
    t.source = Scaled(src, array("f", data))


def card(w, head, body):
    """Adopt a WELCOME's card (``head``: its body head; ``body``: the rest)
    for worker ``w``: a scaler alone here, anything more in ``local_card``
    (this module then unloaded). False, with a stop reason, when this
    worker cannot train the job."""
    ns, sl = head[4], head[5]
    t = w.trainer
    if (head[0] > 1 or head[1] or head[2] or len(body) > sl + 8 * ns
            or hasattr(t, "set_scale") or hasattr(w, "local")
            or hasattr(w, "classes")):  # fmt: skip
        from edgeps_worker import local_card, unload

        unload("scaled")  # local_card loads it again for a scaler
        try:
            return local_card.card(w, head, body)
        finally:
            local_card = None
            unload("local_card")
    if len(body) != sl + 8 * ns:
        w.count_bad("welcome")
        return False
    try:
        set_scale(t, bytes(body[sl:]) if ns else None)
    except ValueError as x:
        w.note("job scaler: " + str(x))
        w.stop_reason = "model_mismatch"
        return False
    return True
