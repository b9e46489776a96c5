"""The steps a Worker runs now and then: joining, a STOP or REJECT, leaving.

Functions of the worker ``w`` (and at most one argument), called through
``Worker._rare("name")`` (each call site names ``worker_link.name``): a board
imports this module for the call and unloads it after, so its bytecode is on
the heap only while it runs (its names stay interned). Everything runs once
per link, per HELLO or per rare message; nothing here is on the path of a
release or a push. They use the worker's public state and methods only (see
``Worker``).
"""

import struct

from edgeps_worker import clock, unload


def _encode(name, *args):
    # HELLO and BYE are encoded by wire_join, loaded for the call only: a
    # connect then never has it and mqtt_open on the heap at once; each call
    # site names the function (wire_join.<name>)
    from edgeps_worker import wire_join

    try:
        return getattr(wire_join, name)(*args)
    finally:
        unload("wire_join")


def start_link(w):
    """Connect, subscribe, start a new session (Worker.start_link)."""
    w.nonce = clock.random_u64()
    # wire_join.encode_bye
    bye = _encode("encode_bye", w.job, w.wid, w.nonce, "lost", w.key)
    w.t.connect(w.up, bye)
    w.t.subscribe(w.down, 1)
    w.t.subscribe("edgeps/" + w.job + "/params/shared", 1)  # see wire_host
    w.t.subscribe(w.model_topic, 1)
    w.note("connected")
    w.backoff_ms = 0  # a link that came up: the next delay starts from the base
    w.sink.reset()
    w.session = None
    w.joined = False
    if w.unacked is not None:
        # its session is gone: HELLO first, never resend it
        w.unacked = None
        w.stats["dropped_updates"] += 1


def hello(w):
    """Ask to join (again): HELLO, then wait for a release."""
    t = w.trainer
    # wire_join.encode_hello
    mo = t.moments() if hasattr(t, "moments") else None  # CPython trainers
    hi = _encode("encode_hello", w.job, w.wid, w.instance, w.nonce, t.model,
                                w.max_chunk, w.sink.reads,
                                getattr(t, "max_batch", 0), w.key,
                                getattr(t, "codecs", 2), mo)  # fmt: skip
    w.t.publish(w.up, hi, 1)
    w.stats["hellos"] += 1
    w.sink.reset()  # the PS answers with a release, maybe the last one
    now = clock.ticks_ms()
    w.last_hb = now
    w.waiting = True
    w.wait_since = now


def on_welcome(w, msg):
    if msg.nonce != w.nonce:
        w.count_bad("nonce")  # the answer to a HELLO of an earlier link
        return
    if msg.n_params != w.n_params:
        w.note("job model has " + str(msg.n_params) + " parameters, this trainer "
               + str(w.n_params))  # fmt: skip
        w.stop_reason = "model_mismatch"
        return
    if not getattr(w.trainer, "codecs", 2) >> msg.codec & 1:
        w.note("job update code " + str(msg.codec) + " is not made here")
        w.stop_reason = "codec"
        return
    if not _card(w, msg):
        return
    w.codec, w.codec_arg = msg.codec, msg.codec_arg
    w.refused = 0
    if (msg.run, msg.session) != (w.run_id, w.session):
        w.run_id = msg.run
        w.session = msg.session
        w.seq = 0
        w.sink.reset()


def _card(w, msg):
    # WELCOME's body (PROTOCOL.md): a head (local_steps u16, local_epochs,
    # local_time, lr f32, n_scale, spec_len u16) | model spec | scaler |
    # class names. A job with nothing but the model (and a worker that never
    # had more) needs none of its code (scaled, local_round). False: not this
    # job's worker.
    body, t = msg.data, w.trainer
    if len(body) < 18:
        w.count_bad("welcome")
        return False
    head = struct.unpack_from("<HfffHH", body, 0)
    if (head[0] > 1 or head[1] or head[2] or len(body) > 18 + head[5]
            or hasattr(t, "set_scale") or hasattr(w, "local")
            or hasattr(w, "classes") or hasattr(t, "source")
            and hasattr(t.source, "s")):  # fmt: skip
        from edgeps_worker import scaled  # local_round's, when it needs more

        return scaled.card(w, head, body[18:])
    return True


def on_stop(w, reason):
    # "model <the job's spec>" names what the job trains (PROTOCOL.md, STOP)
    w.note("stopped by the host: " + reason)
    reason = reason.split(" ")[0]
    if reason == "duplicate_id":
        # another live process holds this id: ask twice more, then give up
        w.refused += 1
        if w.refused > 2:
            w.note("worker id " + w.wid + " is in use by another process")
            w.stop_reason = "duplicate_id"
    else:
        w.stop_reason = "model_mismatch" if reason == "model" else reason


def on_reject(w, msg):
    reason = str(msg.reason)
    w.stats["rejects"] += 1
    w.reject_reasons[reason] = w.reject_reasons.get(reason, 0) + 1
    w.note("rejected seq " + str(msg.seq) + ": " + reason)
    if reason in ("unknown_worker", "dead_worker", "stale_session"):
        hello(w)
    elif reason in _NO_RELEASE and w.waiting and w.unacked and msg.seq == w.seq:
        # the PS refused our UPDATE before its core saw it, so no release
        # follows: a HELLO on the same link brings one at once
        hello(w)


# UPDATE rejections made at the PS's ingest (PROTOCOL.md, "Checks of an UPDATE body")
_NO_RELEASE = ("codec", "bad_length", "bad_index", "steps")


def oversized(w, topic):
    """A message longer than the board's buffers, read off the link and dropped
    by the transport: counted as a rejection ``oversized``, logged with its topic."""
    w.reject_reasons["oversized"] = w.reject_reasons.get("oversized", 0) + 1
    w.count_bad("oversized on " + topic)


def backoff(w):
    """Back off before a reconnect, waking early when the stop callback fires.

    The delay doubles from backoff_min_ms to backoff_max_ms over failed
    connects and starts from backoff_min_ms again after a link came up.
    """
    ms = w.backoff_ms
    ms = w.backoff_ms = min(ms * 2, w.backoff_max_ms) if ms else w.backoff_min_ms
    w.note("reconnecting in " + str(ms) + " ms")
    start = clock.ticks_ms()
    while clock.ticks_diff(clock.ticks_ms(), start) < ms:
        if w.should_stop():
            return
        clock.sleep_ms(min(50, ms))


def leave(w):
    """Say BYE when a link is up; a dead link leaves it to the last will."""
    try:
        if w.t.connected:
            # wire_join.encode_bye
            bye = _encode("encode_bye", w.job, w.wid, w.nonce, "bye", w.key)
            w.t.publish(w.up, bye, 1)
    except (OSError, MemoryError) as exc:
        w.note("bye failed: " + repr(exc))
    close(w)


def close(w):
    """Close the transport; a dead link has nothing left to close."""
    try:
        w.t.close()
    except OSError:
        pass
