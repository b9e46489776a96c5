"""The job's scaler on a board: a ``Scaled`` source in front of the trainer's.

Its own small module: a board whose WELCOME carries a scaler and nothing
else of ``local_round`` (local rounds, class names) loads only this, and
keeps only this while it trains (a window model's first connect is its
tightest moment in the heap).
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
    if isinstance(src, Scaled):
        src = src.source
    if data is None:
        t.source = src
        return
    if len(data) != 8 * src.n_features:
        raise ValueError("the job's scaler does not fit this model")
    t.source = Scaled(src, array("f", data))


def card(w, ns, body):
    """Adopt a WELCOME card that holds the model spec and a scaler of ``ns``
    features and nothing else (``body``: its scaler's bytes); False, with a
    stop reason, when this worker cannot train the job with it."""
    if len(body) != 8 * ns:
        w.count_bad("welcome")
        return False
    try:
        set_scale(w.trainer, bytes(body) if ns else None)
    except ValueError as x:
        w.note("job scaler: " + str(x))
        w.stop_reason = "model_mismatch"
        return False
    return True
