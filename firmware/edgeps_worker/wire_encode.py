"""Encoders of what a board sends: arguments -> framed bytes (UPDATE in chunks).

The PS's encoders (PARAMS, MODEL, REJECT, whole-list UPDATE) are in wire_host.
"""

import struct

from edgeps_worker.wire_format import (
    BYE,
    DEFAULT_CHUNK,
    DTYPE_F32,
    DTYPE_SIZE,
    FIELDS,
    FLAG_HMAC,
    HEARTBEAT,
    HELLO,
    HMAC_LEN,
    MAGIC,
    MAX_TEXT,
    MAX_TOTAL,
    PREFIX,
    PREFIX_LEN,
    PROTOCOL_VERSION,
    UPDATE,
    byte_view,
    check_id,
    hmac_sha256,
)

# ---------------------------------------------------------------- encoding


def _uint(name, v, bits):
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("%s must be an int, got %r" % (name, v))
    if v < 0 or v >> bits:
        raise ValueError("%s out of range for u%d: %d" % (name, bits, v))
    return v


def _text(name, s):
    if not isinstance(s, str):
        raise TypeError("%s must be a str" % name)
    b = s.encode()
    if len(b) > MAX_TEXT:
        raise ValueError("%s longer than %d bytes" % (name, MAX_TEXT))
    return b


def _frame(mtype, jb, wb, fmt, vals, body, key):
    flen = struct.calcsize(fmt)
    hl = PREFIX_LEN + len(jb) + len(wb) + flen
    bl = len(body)
    out = bytearray(hl + bl + (HMAC_LEN if key else 0))
    flags = FLAG_HMAC if key else 0
    struct.pack_into(
        PREFIX, out, 0, MAGIC, PROTOCOL_VERSION, mtype, flags, len(jb), len(wb), 0, bl
    )
    p = PREFIX_LEN
    out[p : p + len(jb)] = jb
    p += len(jb)
    out[p : p + len(wb)] = wb
    p += len(wb)
    struct.pack_into(fmt, out, p, *vals)
    p += flen
    out[p : p + bl] = body
    if key:
        out[hl + bl :] = hmac_sha256(key, memoryview(out)[: hl + bl])[:HMAC_LEN]
    return bytes(out)


def _chunks(mtype, jb, wb, fmt, head, data, dtype, max_chunk, key):
    """Check eagerly, then return a generator of framed chunks.

    The per-chunk fields are ``head + (dtype, index, count, size, total)``.
    """
    if dtype not in DTYPE_SIZE:
        raise ValueError("unknown dtype %r" % (dtype,))
    _uint("max_chunk", max_chunk, 32)
    mv, isz = byte_view(data)
    esz = DTYPE_SIZE[dtype]
    total = len(mv)
    if total % esz:
        raise ValueError("data length %d is not a multiple of %d" % (total, esz))
    if total > MAX_TOTAL:
        raise ValueError("data longer than %d bytes" % MAX_TOTAL)
    room = max_chunk - PREFIX_LEN - len(jb) - len(wb) - struct.calcsize(fmt)
    room -= HMAC_LEN if key else 0
    # whole elements per chunk, so a board can land each chunk in a typed array
    size = room - room % max(esz, isz)
    if size <= 0:
        raise ValueError("max_chunk %d leaves no room for data" % max_chunk)
    if total == 0:
        size = 0
        count = 1
    else:
        size = min(size, total)
        count = (total + size - 1) // size
        if count > 0xFFFF:
            raise ValueError("more than 65535 chunks: raise max_chunk")
    return _gen(mtype, jb, wb, fmt, head, data, mv, dtype, count, size, total, key)


def _gen(mtype, jb, wb, fmt, head, data, mv, dtype, count, size, total, key):
    # ``data`` stays referenced here: on MicroPython ``mv`` aliases its memory
    for i in range(count):
        a = i * size
        vals = head + (dtype, i, count, size, total)
        yield _frame(mtype, jb, wb, fmt, vals, mv[a : min(total, a + size)], key)
    del data


def _f32(name, v):
    try:
        return float(v)
    except (TypeError, ValueError):
        raise TypeError("%s must be a float, got %r" % (name, v)) from None


def encode_hello(
    job, wid, incarnation, model="", max_chunk=DEFAULT_CHUNK, dtypes=None, key=None
):
    """A worker announces itself (and asks for parameters)."""
    if dtypes is None:
        dtypes = (DTYPE_F32,)
    mask = 0
    for d in dtypes:
        if d not in DTYPE_SIZE:
            raise ValueError("unknown dtype %r" % (d,))
        mask |= 1 << d
    vals = (
        _uint("incarnation", incarnation, 32),
        _uint("max_chunk", max_chunk, 32),
        mask,
    )
    fmt = FIELDS[HELLO][0]
    return _frame(
        HELLO,
        check_id("job", job),
        check_id("wid", wid),
        fmt,
        vals,
        _text("model", model),
        key,
    )


def iter_update(
    job,
    wid,
    incarnation,
    seq,
    clock,
    base_version,
    compute_time,
    samples,
    loss,
    data,
    dtype=DTYPE_F32,
    max_chunk=DEFAULT_CHUNK,
    key=None,
):
    """Like encode_update but yields chunks one by one (a board holds one at a time)."""
    ct = _f32("compute_time", compute_time)
    if not ct >= 0.0 or ct == float("inf"):
        raise ValueError("compute_time must be finite and >= 0, got %r" % (ct,))
    head = (
        _uint("incarnation", incarnation, 32),
        _uint("seq", seq, 32),
        _uint("clock", clock, 32),
        _uint("base_version", base_version, 32),
        ct,
        _uint("samples", samples, 32),
        _f32("loss", loss),
    )
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _chunks(UPDATE, jb, wb, FIELDS[UPDATE][0], head, data, dtype, max_chunk, key)


def encode_heartbeat(job, wid, incarnation, clock, key=None):
    """I am alive (sent while computing or waiting at a barrier)."""
    vals = (_uint("incarnation", incarnation, 32), _uint("clock", clock, 32))
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _frame(HEARTBEAT, jb, wb, FIELDS[HEARTBEAT][0], vals, b"", key)


def encode_bye(job, wid, incarnation, reason, key=None):
    """A worker leaves (reason "bye"), or its last will fires (reason "lost")."""
    vals = (_uint("incarnation", incarnation, 32),)
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _frame(BYE, jb, wb, FIELDS[BYE][0], vals, _text("reason", reason), key)
