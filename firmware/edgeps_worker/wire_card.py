"""The bodies of HELLO and WELCOME (protocol v3): a worker's data moments, the
job's local rounds and card. Host-side (``wire_host`` re-exports every name);
a board reads WELCOME's head in ``worker_link`` and the rest in
``local_round``, so none of this takes its RAM. Runs on MicroPython too (the
golden byte tests check it there). Layout: firmware/PROTOCOL.md.
"""

import struct

from edgeps_worker.wire import (
    DTYPE_F32,
    FIELDS,
    MAX_TEXT,
    RECORD,
    WELCOME,
    WireError,
    _frame,
    _uint,
    check_id,
)
from edgeps_worker.wire_join import _text


def _finite(x):
    return x == x and x not in (float("inf"), float("-inf"))


def _utf8(name, b):
    if len(b) > MAX_TEXT:
        raise WireError("text", "%s longer than %d bytes" % (name, MAX_TEXT))
    try:
        return bytes(b).decode()
    except Exception:
        raise WireError("text", name + " not UTF-8") from None


def _floats(mv, off, n):
    return struct.unpack_from("<%df" % n, mv, off) if n else ()


WELCOME_HEAD = "<HfffHH"  # local_steps, local_epochs, local_time, lr, n_scale, spec_len
WELCOME_HEAD_LEN = 18


def _hello_body(msg):
    # moments u16 m | [rows u32 | mean f32[m] | var f32[m]] | model spec UTF-8
    body = msg.data
    msg.data = b""
    msg.moments = None
    if len(body) < 2:
        raise WireError("length", "HELLO body without its head")
    m = struct.unpack_from("<H", body, 0)[0]
    body = body[2:]
    if m:
        if len(body) < 4 + 8 * m:
            raise WireError("length", "HELLO moments of %d features" % m)
        rows = struct.unpack_from("<I", body, 0)[0]
        mean, var = _floats(body, 4, m), _floats(body, 4 + 4 * m, m)
        for v in mean + var:
            if not _finite(v):
                raise WireError("value", "HELLO moments not finite")
        if min(var) < 0:
            raise WireError("value", "HELLO moments: a negative variance")
        msg.moments = (rows, mean, var)
        body = body[4 + 8 * m :]
    msg.model = _utf8("model", body)


def welcome_head(body):
    """(local_steps, local_epochs, local_time, lr, n_scale, spec_len) of a
    WELCOME body; WireError when it is too short for them."""
    if len(body) < WELCOME_HEAD_LEN:
        raise WireError("length", "WELCOME body without its head")
    return struct.unpack_from(WELCOME_HEAD, body, 0)


def _welcome_body(msg):
    # head | model spec UTF-8 | mean f32[n] | 1/std f32[n] | class names, "\n"-joined
    body = msg.data
    msg.data = b""
    h, e, t, lr, ns, sl = welcome_head(body)
    body = body[WELCOME_HEAD_LEN:]
    if sl + 8 * ns > len(body):
        raise WireError("length", "WELCOME body shorter than its head says")
    for v in (e, t, lr):
        if not _finite(v) or v < 0:
            raise WireError("value", "WELCOME local settings")
    msg.local_steps, msg.local_epochs, msg.local_time, msg.lr = h, e, t, lr
    msg.n_scale = ns
    msg.model = _utf8("model", body[:sl])
    msg.scale = None
    if ns:
        offset, inv = _floats(body, sl, ns), _floats(body, sl + 4 * ns, ns)
        for v in offset + inv:
            if not _finite(v):
                raise WireError("value", "WELCOME scaler not finite")
        msg.scale = (offset, inv)
    names = _utf8("classes", body[sl + 8 * ns :])
    msg.classes = tuple(names.split("\n")) if names else None


def encode_welcome(
    job, wid, run, nonce, session, n_params, model, key=None, codec=DTYPE_F32,
    codec_arg=0, local_steps=1, local_epochs=0.0, local_time=0.0, lr=0.0,
    scale=None, classes=None,
):  # fmt: skip
    """The PS answers a HELLO (echoing its ``nonce``) with a fresh session.

    ``codec`` is the UPDATE code the worker must use, ``codec_arg`` its
    argument (TOPK: k, the entries per UPDATE; otherwise 0). The job's local
    rounds: ``local_steps`` H (1: push every gradient), or ``local_epochs`` /
    ``local_time`` (> 0: instead of H), at the SGD step ``lr``. The job's
    card: ``scale`` None or (per-feature offsets, inverse stds), what every
    worker applies to its features; ``classes`` None or the class names."""
    if codec not in RECORD:
        raise ValueError("unknown codec %r" % (codec,))
    for name, v in (("local_epochs", local_epochs), ("local_time", local_time),
                    ("lr", lr)):  # fmt: skip
        if not _finite(float(v)) or v < 0:
            raise ValueError("%s must be finite and >= 0, got %r" % (name, v))
    spec = _text("model", model)
    body = spec
    ns = 0
    if scale is not None:
        offset, inv = scale
        ns = len(offset)
        if len(inv) != ns or not 0 < ns < 65536:
            raise ValueError("scale: offsets and inverse stds of 1..65535 features")
        fmt = "<%df" % ns
        body = body + struct.pack(fmt, *offset) + struct.pack(fmt, *inv)
    if classes:
        for name in classes:
            if not name or "\n" in name:
                raise ValueError("class names are non-empty single lines")
        body = body + _text("classes", "\n".join(classes))
    vals = (
        _uint("run", run, 64),
        _uint("nonce", nonce, 64),
        _uint("session", session, 64),
        _uint("n_params", n_params, 32),
        codec,
        _uint("codec_arg", codec_arg, 32),
    )
    head = struct.pack(WELCOME_HEAD, _uint("local_steps", local_steps, 16),
                       float(local_epochs), float(local_time), float(lr), ns,
                       len(spec))  # fmt: skip
    body = head + body
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _frame(WELCOME, jb, wb, FIELDS[WELCOME][0], vals, body, key)
