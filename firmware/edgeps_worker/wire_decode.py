"""Decoder and chunk reassembler of the wire protocol: bytes -> Message."""

import struct

from edgeps_worker.wire_format import (
    DATA_BODY,
    DTYPE_F32,
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
    PARAMS,
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


def _target_view(into):
    """(writable view, item size) of a preallocated buffer for reassembly."""
    try:
        mv = memoryview(into)
    except TypeError:
        raise TypeError("into must be a writable buffer") from None
    try:
        return mv.cast("B"), 1  # CPython: numpy arrays, array('f'), bytearray
    except AttributeError:
        pass
    if len(mv) == 0:
        return mv, 1
    return mv, len(bytes(mv[0:1]))


def _write(view, isz, off, chunk):
    if isz == 1:
        view[off : off + len(chunk)] = chunk
    else:
        # MicroPython typed views only accept a view of the same element type
        from array import array

        view[off // isz : (off + len(chunk)) // isz] = memoryview(
            array("f", bytes(chunk))
        )


class _Partial:
    """The chunks of one logical message seen so far."""

    def __init__(self, msg, now, buf, view, isz):
        self.first = msg
        self.t0 = now
        self.buf = buf
        self.view = view
        self.isz = isz
        self.seen = bytearray((msg.chunk_count + 7) // 8)
        self.missing = msg.chunk_count
        self.meta = _meta(msg)


def _meta(msg):
    # every chunk of one message must agree on these; floats compared as bits
    return (
        msg.dtype,
        msg.chunk_count,
        msg.chunk_size,
        msg.total_len,
        msg.clock,
        msg.base_version,
        msg.samples,
        struct.pack("<ff", msg.compute_time, msg.loss),
    )


class Reassembler:
    """Joins chunked UPDATE/PARAMS messages with bounded memory and age.

    ``max_bytes`` bounds one message, ``max_pending`` the number of partial
    messages held at once (the oldest is evicted), ``max_age`` (seconds, same
    clock as ``now``) how long a partial may wait for its missing chunks.
    """

    def __init__(self, max_bytes=1 << 24, max_age=30.0, max_pending=64):
        if max_bytes <= 0 or max_pending <= 0 or not max_age > 0:
            raise ValueError("max_bytes, max_age and max_pending must be > 0")
        self.max_bytes = max_bytes
        self.max_age = max_age
        self.max_pending = max_pending
        self._pending = {}
        # keys of recently completed messages: a late redelivered chunk of one
        # must not start a partial that can never complete
        self._done = []
        self.duplicates = 0
        self.expired = 0
        self.evicted = 0

    def pending(self):
        """Number of partial messages held."""
        return len(self._pending)

    def pending_bytes(self):
        """Bytes reserved by partial messages (preallocated buffers excluded)."""
        n = 0
        for p in self._pending.values():
            if p.buf is not None:
                n += len(p.buf)
        return n

    def expire(self, now):
        """Drop partial messages older than max_age; returns how many."""
        old = [k for k, p in self._pending.items() if now - p.t0 > self.max_age]
        for k in old:
            del self._pending[k]
        self.expired += len(old)
        return len(old)

    def add(self, msg, now, into=None):
        """Feed one decoded message; returns the whole message once complete.

        Messages that are not chunked come straight back. ``into`` (a
        bytearray, or on MicroPython an array('f') for f32) receives the
        payload without a full-size copy; the result's ``data`` is then it.
        Chunks that disagree or exceed the bounds raise WireError.
        """
        if msg.type != UPDATE and msg.type != PARAMS:
            return msg
        self.expire(now)
        total = msg.total_len
        if total > self.max_bytes:
            raise WireError("size", "%d > %d bytes" % (total, self.max_bytes))
        if msg.chunk_count == 1 and into is None:
            return msg
        if msg.type == UPDATE:
            key = (UPDATE, msg.job, msg.wid, msg.incarnation, msg.seq)
        else:
            key = (PARAMS, msg.job, msg.wid, msg.version, msg.seq)
        part = self._pending.get(key)
        if part is None:
            if key in self._done:
                self.duplicates += 1
                return None
            part = self._start(key, msg, now, into)
        elif _meta(msg) != part.meta:
            del self._pending[key]
            raise WireError("chunk", "chunks of one message disagree")
        i = msg.chunk_index
        bit = 1 << (i & 7)
        if part.seen[i >> 3] & bit:
            self.duplicates += 1
            return None
        part.seen[i >> 3] |= bit
        _write(part.view, part.isz, msg.offset, msg.data)
        part.missing -= 1
        if part.missing:
            return None
        del self._pending[key]
        self._done.append(key)
        if len(self._done) > 2 * self.max_pending + 8:
            self._done.pop(0)
        whole = part.first.copy()
        whole.chunk_index = 0
        whole.chunk_count = 1
        whole.chunk_size = total
        whole.offset = 0
        whole.data = part.buf if into is None else into
        return whole

    def _start(self, key, msg, now, into):
        if into is None:
            buf = bytearray(msg.total_len)
            view, isz = memoryview(buf), 1
        else:
            buf = None
            view, isz = _target_view(into)
            if len(view) * isz != msg.total_len:
                raise WireError("length", "payload does not fit the buffer")
            if isz != 1 and msg.dtype != DTYPE_F32:
                raise WireError("dtype", "typed buffer needs f32 payloads")
        while len(self._pending) >= self.max_pending:
            oldest = None
            for k, p in self._pending.items():
                if oldest is None or p.t0 < self._pending[oldest].t0:
                    oldest = k
            del self._pending[oldest]
            self.evicted += 1
        part = _Partial(msg, now, buf, view, isz)
        self._pending[key] = part
        return part
