"""Decoder of the wire protocol: bytes -> Message (the reassembler is host-only)."""

import struct

from edgeps_worker.wire_format import (
    DATA_BODY,
    DTYPE_SIZE,
    FIELDS,
    FLAG_HMAC,
    HMAC_LEN,
    MAGIC,
    MAX_MESSAGE,
    MAX_TEXT,
    MAX_TOTAL,
    MODEL,
    MODEL_STATES,
    PREFIX,
    PREFIX_LEN,
    PROTOCOL_VERSION,
    TEXT_BODY,
    UPDATE,
    Message,
    WireError,
    hmac_sha256,
    same_digest,
    valid_id,
)


def _as_view(buf):
    try:
        mv = memoryview(buf)
    except TypeError:
        raise WireError("buffer", "not bytes-like") from None
    try:
        if mv.format != "B" or mv.ndim != 1:
            mv = mv.cast("B")
    except AttributeError:
        pass  # MicroPython: bytes/bytearray views are already flat bytes
    except (TypeError, ValueError):
        raise WireError("buffer", "not a contiguous byte buffer") from None
    return mv


def _decode_id(mv, name):
    try:
        s = bytes(mv).decode()
    except Exception:
        raise WireError("id", name + " is not UTF-8") from None
    if not valid_id(s):
        raise WireError("id", "bad " + name)
    return s


def decode(buf, key=None, max_len=MAX_MESSAGE):
    """Bytes -> Message; raises WireError(reason) on anything malformed.

    With a (non-empty) ``key`` the HMAC tag is required and checked; without
    one a tag, if present, is skipped unchecked (``msg.tagged`` says so).
    """
    mv = _as_view(buf)
    n = len(mv)
    if n > max_len:
        raise WireError("oversize", "%d > %d bytes" % (n, max_len))
    if n < PREFIX_LEN:
        raise WireError("short", "%d bytes" % n)
    magic, ver, mtype, flags, jl, wl, _, bl = struct.unpack_from(PREFIX, mv, 0)
    if magic != MAGIC:
        raise WireError("magic")
    if ver != PROTOCOL_VERSION:
        raise WireError("version", "got %d" % ver)
    spec = FIELDS.get(mtype)
    if spec is None:
        raise WireError("type", "got %d" % mtype)
    if flags & ~FLAG_HMAC:
        raise WireError("flags", "got 0x%02x" % flags)
    fmt, names = spec
    p = PREFIX_LEN + jl + wl
    hl = p + struct.calcsize(fmt)
    tl = HMAC_LEN if flags & FLAG_HMAC else 0
    if n < hl + bl + tl:
        raise WireError("short", "%d < %d bytes" % (n, hl + bl + tl))
    if n != hl + bl + tl:
        raise WireError("length", "%d trailing bytes" % (n - hl - bl - tl))
    if key:
        if not tl:
            raise WireError("hmac", "tag missing")
        want = hmac_sha256(key, mv[: hl + bl])[:HMAC_LEN]
        if not same_digest(want, mv[hl + bl :]):
            raise WireError("hmac", "tag mismatch")
    job = _decode_id(mv[PREFIX_LEN : PREFIX_LEN + jl], "job")
    if mtype == MODEL:
        if wl:
            raise WireError("id", "model message carries a worker id")
        wid = ""
    else:
        wid = _decode_id(mv[PREFIX_LEN + jl : p], "wid")
    msg = Message(mtype, job, wid)
    msg.flags = flags
    msg.tagged = bool(tl)
    vals = struct.unpack_from(fmt, mv, p)
    for i in range(len(names)):
        setattr(msg, names[i], vals[i])
    body = mv[hl : hl + bl]
    if mtype in DATA_BODY:
        _check_chunk(msg, bl)
        msg.data = body  # pyright: ignore[reportAttributeAccessIssue]
    elif mtype in TEXT_BODY:
        if bl > MAX_TEXT:
            raise WireError("text", "longer than %d bytes" % MAX_TEXT)
        try:
            text = bytes(body).decode()
        except Exception:
            raise WireError("text", "not UTF-8") from None
        setattr(msg, TEXT_BODY[mtype], text)
    elif bl:
        raise WireError("length", "unexpected body")
    if mtype == MODEL:
        code = vals[0]  # the state byte
        if code >= len(MODEL_STATES):
            raise WireError("value", "model state %d" % code)
        msg.state = MODEL_STATES[code]
    elif mtype == UPDATE:
        ct = msg.compute_time
        if not ct >= 0.0 or ct == float("inf"):
            raise WireError("value", "compute_time")
    return msg


def _check_chunk(msg, bl):
    esz = DTYPE_SIZE.get(msg.dtype)
    if esz is None:
        raise WireError("dtype", "got %d" % msg.dtype)
    total = msg.total_len
    size = msg.chunk_size
    count = msg.chunk_count
    idx = msg.chunk_index
    if total > MAX_TOTAL or total % esz:
        raise WireError("length", "total_len %d" % total)
    if total == 0:
        if size or count != 1 or idx or bl:
            raise WireError("chunk", "empty payload with chunk fields")
        return
    if size == 0 or size % esz or count != (total + size - 1) // size:
        raise WireError("chunk", "size %d count %d total %d" % (size, count, total))
    if idx >= count:
        raise WireError("chunk", "index %d of %d" % (idx, count))
    msg.offset = idx * size
    if bl != min(size, total - msg.offset):
        raise WireError("length", "chunk body %d bytes" % bl)
