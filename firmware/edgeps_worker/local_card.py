"""A WELCOME's card on a worker: local rounds, the scaler, the class names.

Loaded for a WELCOME that carries more than a scaler (``scaled.card``
hands it here) and unloaded after it: a board training local rounds keeps
only ``local_round``'s steps on its heap, which the round's third
parameter-sized buffer (the anchor) needs.
"""


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


def set_scale(t, data):
    """``scaled.set_scale``: that module loads only for a job with a scaler."""
    from edgeps_worker import scaled

    scaled.set_scale(t, data)
