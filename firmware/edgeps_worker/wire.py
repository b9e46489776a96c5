"""edgeps wire protocol v3 as a board uses it: layout, codes, ids, HMAC, decode.

Pure, shared with the host (MicroPython 1.2x, CPython 3.10+), ``struct`` formats
laid out in firmware/PROTOCOL.md; ``wire_host`` adds the PS's encoders."""

import struct
from hashlib import sha256

PROTOCOL_VERSION = 3
MAGIC = b"EP"

# message types 1..9
HELLO, UPDATE, PARAMS, HEARTBEAT, BYE, MODEL, REJECT, WELCOME, STOP = range(1, 10)

# codes of UPDATE/PARAMS bodies (PROTOCOL.md, "Codes"); RECORD: the unit a
# chunk boundary respects (I8: a block of f32 scale + I8_BLOCK int8)
DTYPE_F32, DTYPE_F16, DTYPE_I8, DTYPE_TOPK = 1, 2, 3, 4
I8_BLOCK = 128
RECORD = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_I8: 4 + I8_BLOCK, DTYPE_TOPK: 8}

FLAG_HMAC = 0x01
HMAC_LEN = 16  # hmac-sha256 truncated to 128 bits
MODEL_STATES = ("running", "done")
MAX_TEXT = 2048  # model spec / reason strings, in UTF-8 bytes
MAX_MESSAGE = 1 << 20  # default bound on one encoded message (one chunk)
MAX_TOTAL = 1 << 28  # bound on the logical length announced by a chunk

# magic, version, type, flags, job id length, worker id length, reserved,
# body length; then job id, worker id, per-type fields, body, optional tag
PREFIX = "<2sBBBBBBI"
PREFIX_LEN = 12

# per-type fixed fields, after the two ids
_CHUNK = ("dtype", "chunk_index", "chunk_count", "chunk_size", "total_len")
FIELDS = {
    HELLO: ("<QQIBHB", ("instance", "nonce", "max_chunk", "dtypes", "max_batch",
                        "codecs")),
    UPDATE: ("<QIIIfIfHBHHII", ("session", "seq", "clock", "base_version",
                                "compute_time", "samples", "loss", "steps")
             + _CHUNK),
    PARAMS: ("<QQIIHBHHII", ("run", "session", "version", "seq", "batch") + _CHUNK),
    HEARTBEAT: ("<QI", ("session", "clock")),
    BYE: ("<Q", ("nonce",)),
    MODEL: ("<QBII", ("run", "state", "version", "n_params")),
    REJECT: ("<QQI", ("run", "session", "seq")),
    WELCOME: ("<QQQIBI", ("run", "nonce", "session", "n_params", "codec",
                          "codec_arg")),
    STOP: ("<QQ", ("run", "session")),
    # 10: RELEASE (named in wire_host: a board global costs RAM; see PROTOCOL.md)
    10: ("<QQIIH16s", ("run", "session", "version", "seq", "batch", "digest")),
}  # fmt: skip
del _CHUNK  # a board keeps no more module globals than it uses
# which attribute carries the UTF-8 body of text messages
# (HELLO's and WELCOME's bodies are binary, each led by a fixed head,
# parsed where they are used: wire_host on the PS, worker_link on a worker)
TEXT_BODY = {BYE: "reason", MODEL: "model", REJECT: "reason",
             STOP: "reason"}  # fmt: skip
_ID_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


class WireError(ValueError):
    """Bad bytes from the network; ``reason`` is a short stable token for counters."""

    def __init__(self, reason, detail=""):
        super().__init__(reason + ": " + detail if detail else reason)
        self.reason = reason


class Message:
    """One decoded message (or chunk); fields its type lacks read as these class
    defaults, so only the fields decode sets take room in an instance (HELLO's
    codecs, WELCOME's codec and codec_arg have no default: read them there)."""

    flags = session = seq = clock = base_version = samples = dtype = 0
    version = chunk_index = chunk_size = total_len = offset = n_params = 0
    max_chunk = dtypes = run = nonce = instance = max_batch = batch = 0
    chunk_count = 1
    tagged = False
    compute_time = 0.0
    loss = float("nan")
    data = digest = b""
    reason = state = model = ""

    def __init__(self, mtype, job, wid):
        self.type = mtype
        self.job = job
        self.wid = wid


def encoded_len(code, n, k=0):
    """Bytes of ``n`` parameters in ``code`` (TOPK: ``k`` records)."""
    if code == DTYPE_I8:
        return 4 * ((n + I8_BLOCK - 1) // I8_BLOCK) + n
    return 8 * k if code == DTYPE_TOPK else RECORD[code] * n


def valid_id(s):
    """True if ``s`` is a job/worker id: 1..32 of [A-Za-z0-9_-]."""
    if not isinstance(s, str) or not 0 < len(s) <= 32:
        return False
    for c in s:
        if c not in _ID_CHARS:
            return False
    return True


def check_id(name, s):
    if not valid_id(s):
        raise ValueError("%s must be 1..32 of [A-Za-z0-9_-], got %r" % (name, s))
    return s.encode()


def topic_up(job, wid):
    """Worker -> PS topic of one worker."""
    jb, wb = check_id("job", job), check_id("wid", wid)
    return "edgeps/" + jb.decode() + "/up/" + wb.decode()


def topic_down(job, wid):
    """PS -> worker topic of one worker (welcome, releases, rejects, stop)."""
    jb, wb = check_id("job", job), check_id("wid", wid)
    return "edgeps/" + jb.decode() + "/down/" + wb.decode()


def topic_model(job):
    """Retained job-state topic every worker reads first."""
    check_id("job", job)
    return "edgeps/" + job + "/model"


def byte_view(data):
    """(flat byte memoryview, source item size) of a buffer, without a copy. A
    MicroPython memoryview of array('f') counts items and cannot be re-typed,
    so there its memory is aliased (the caller keeps ``data`` alive)."""
    if isinstance(data, (bytes, bytearray)):
        return memoryview(data), 1
    try:
        mv = memoryview(data)
    except TypeError:
        raise TypeError("data must be bytes-like, got %r" % type(data)) from None
    try:
        return mv.cast("B"), 1  # CPython
    except AttributeError:
        pass
    n = len(mv)
    if n == 0:
        return mv, 1
    isz = len(bytes(mv[0:1]))
    import uctypes  # type: ignore[import-not-found]

    return memoryview(uctypes.bytearray_at(uctypes.addressof(data), n * isz)), isz


_pads = {}  # type: dict


def hmac_sha256(key, msg):
    """RFC 2104 HMAC-SHA256 (MicroPython has sha256 but no ``hmac`` module)."""
    if not isinstance(key, bytes):
        key = bytes(key)  # a bytearray key cannot be a dict key
    pads = _pads.get(key)
    if pads is None:
        k = key
        if len(k) > 64:
            k = sha256(k).digest()
        k = k + bytes(64 - len(k))
        pads = (bytes(b ^ 0x36 for b in k), bytes(b ^ 0x5C for b in k))
        if len(_pads) > 8:
            _pads.clear()
        _pads[key] = pads
    inner = sha256(pads[0])
    inner.update(msg)
    outer = sha256(pads[1])
    outer.update(inner.digest())
    return outer.digest()


def _decode_id(mv, name):
    try:
        s = bytes(mv).decode()
    except Exception:
        raise WireError("id", name + " is not UTF-8") from None
    if not valid_id(s):
        raise WireError("id", "bad " + name)
    return s


def decode(buf, key=None, max_len=MAX_MESSAGE):
    """Bytes -> Message, or WireError(reason). With a (non-empty) ``key`` the HMAC
    tag is required and checked (MODEL excepted); else skipped (``msg.tagged``)."""
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
    # MODEL (informational) and a shared PARAMS (no worker id) are never signed
    if key and wl and mtype != MODEL:
        if not tl:
            raise WireError("hmac", "tag missing")
        want = hmac_sha256(key, mv[: hl + bl])
        acc = 0  # constant time, so a forger learns nothing from timing
        for i in range(HMAC_LEN):
            acc |= want[i] ^ mv[hl + bl + i]
        if acc:
            raise WireError("hmac", "tag mismatch")
    job = _decode_id(mv[PREFIX_LEN : PREFIX_LEN + jl], "job")
    if mtype == MODEL and wl:
        raise WireError("id", "model message carries a worker id")
    wid = ""
    if wl or mtype != PARAMS and mtype != MODEL:  # a shared PARAMS names no worker
        wid = _decode_id(mv[PREFIX_LEN + jl : p], "wid")
    msg = Message(mtype, job, wid)
    msg.flags = flags
    msg.tagged = bool(tl)
    vals = struct.unpack_from(fmt, mv, p)
    for i in range(len(names)):
        setattr(msg, names[i], vals[i])
    body = mv[hl : hl + bl]
    if mtype == UPDATE or mtype == PARAMS:
        rec = RECORD.get(msg.dtype)  # the chunk fields must agree with the body
        if rec is None:
            raise WireError("dtype", "got %d" % msg.dtype)
        total, size = msg.total_len, msg.chunk_size
        count, idx = msg.chunk_count, msg.chunk_index
        r = total % rec  # whole records; I8's last block: a scale and >= 1 int8
        if total > MAX_TOTAL or r and not (msg.dtype == DTYPE_I8 and r > 4):
            raise WireError("length", "total_len %d" % total)
        if total == 0:
            if size or count != 1 or idx or bl:
                raise WireError("chunk", "empty payload with chunk fields")
        else:
            if size == 0 or size % rec or count != (total + size - 1) // size:
                raise WireError(
                    "chunk", "size %d count %d total %d" % (size, count, total)
                )
            if idx >= count:
                raise WireError("chunk", "index %d of %d" % (idx, count))
            msg.offset = idx * size
            if bl != min(size, total - msg.offset):
                raise WireError("length", "chunk body %d bytes" % bl)
        msg.data = body  # pyright: ignore[reportAttributeAccessIssue]
    elif mtype in TEXT_BODY:
        if bl > MAX_TEXT:
            raise WireError("text", "longer than %d bytes" % MAX_TEXT)
        try:
            text = bytes(body).decode()
        except Exception:
            raise WireError("text", "not UTF-8") from None
        setattr(msg, TEXT_BODY[mtype], text)
    elif mtype == HELLO or mtype == WELCOME:
        msg.data = body  # pyright: ignore[reportAttributeAccessIssue]
    elif bl:
        raise WireError("length", "unexpected body")
    if mtype == MODEL:
        code = vals[1]  # the state byte
        if code >= len(MODEL_STATES):
            raise WireError("value", "model state %d" % code)
        msg.state = MODEL_STATES[code]
    elif mtype == UPDATE:
        ct = msg.compute_time
        if not ct >= 0.0 or ct == float("inf"):
            raise WireError("value", "compute_time")
    return msg


def _uint(name, v, bits):
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError("%s must be an int, got %r" % (name, v))
    if v < 0 or v >> bits:
        raise ValueError("%s out of range for u%d: %d" % (name, bits, v))
    return v


def _frame(mtype, jb, wb, fmt, vals, body, key, out=None, off=0):
    """One framed message: into ``out`` at ``off`` (returns its length), else a
    new bytearray (itself: a copy would double a chunk on a board's heap)."""
    hl = PREFIX_LEN + len(jb) + len(wb) + struct.calcsize(fmt)
    bl = len(body)
    new = out is None
    if new:
        out = bytearray(hl + bl + (HMAC_LEN if key else 0))
    flags = FLAG_HMAC if key else 0
    struct.pack_into(
        PREFIX, out, off, MAGIC, PROTOCOL_VERSION, mtype, flags, len(jb), len(wb), 0, bl
    )
    p = off + PREFIX_LEN
    out[p : p + len(jb)] = jb
    p += len(jb)
    out[p : p + len(wb)] = wb
    struct.pack_into(fmt, out, p + len(wb), *vals)
    p = off + hl
    out[p : p + bl] = body
    if key:
        p += bl
        out[p : p + HMAC_LEN] = hmac_sha256(key, memoryview(out)[off:p])[:HMAC_LEN]
    return out if new else hl + bl + (HMAC_LEN if key else 0)


def _plan(mtype, jb, wb, fmt, head, data, dtype, max_chunk, key):
    """Check eagerly; the chunking of ``data``: ``(count, ...)`` for chunk_frame,
    whose fields are ``head + (dtype, index, count, size, total)``."""
    if dtype not in RECORD:
        raise ValueError("unknown dtype %r" % (dtype,))
    _uint("max_chunk", max_chunk, 32)
    mv, isz = byte_view(data)
    rec = RECORD[dtype]
    total = len(mv)
    r = total % rec
    if r and not (dtype == DTYPE_I8 and r > 4):
        raise ValueError("data length %d is not whole records of %d" % (total, rec))
    if total > MAX_TOTAL:
        raise ValueError("data longer than %d bytes" % MAX_TOTAL)
    hl = PREFIX_LEN + len(jb) + len(wb) + struct.calcsize(fmt)
    hl += HMAC_LEN if key else 0
    room = max_chunk - hl
    # whole records per chunk, so a board can land each chunk in a typed array
    step = rec
    while step % isz:
        step += rec
    size = room - room % step
    if size <= 0:
        raise ValueError("max_chunk %d leaves no room for data" % max_chunk)
    if total == 0:
        size = 0
        count = 1
    else:
        size = min(size, (total + rec - 1) // rec * rec)  # I8: whole blocks
        count = (total + size - 1) // size
        if count > 0xFFFF:
            raise ValueError("more than 65535 chunks: raise max_chunk")
    # ``data`` stays referenced: on MicroPython ``mv`` aliases its memory
    return (count, mtype, jb, wb, fmt, head, data, mv, dtype, size, total, key, hl)


def chunk_len(plan, i):
    """Bytes of chunk ``i`` of a ``_plan``, framed."""
    a = i * plan[9]
    return plan[12] + min(plan[9], plan[10] - a)


def chunk_frame(out, off, plan, i):
    """Chunk ``i`` of a ``_plan`` framed into ``out`` at ``off`` (returns its
    length); ``out`` None: as a new bytearray."""
    count, mtype, jb, wb, fmt, head, _, mv, dtype, size, total, key, _ = plan
    a = i * size
    vals = head + (dtype, i, count, size, total)
    return _frame(mtype, jb, wb, fmt, vals, mv[a : min(total, a + size)], key, out, off)


def update_plan(job, wid, session, seq, clock, base_version, compute_time,
                samples, loss, data, dtype=DTYPE_F32, max_chunk=4096,
                key=None, steps=1):  # fmt: skip
    """An UPDATE's chunks to frame one at a time (``chunk_frame``): a board holds
    none of them, it frames each straight into its MQTT send buffer. ``steps``:
    1, ``data`` is a gradient; H > 1, the model delta of H local steps."""
    try:
        ct, lo = float(compute_time), float(loss)
    except (TypeError, ValueError):
        raise TypeError("compute_time and loss must be floats") from None
    if not ct >= 0.0 or ct == float("inf"):
        raise ValueError("compute_time must be finite and >= 0, got %r" % (ct,))
    head = (_uint("session", session, 64), _uint("seq", seq, 32),
            _uint("clock", clock, 32), _uint("base_version", base_version, 32),
            ct, _uint("samples", samples, 32), lo,
            _uint("steps", steps, 16))  # fmt: skip
    jb, wb = check_id("job", job), check_id("wid", wid)
    return _plan(UPDATE, jb, wb, FIELDS[UPDATE][0], head, data, dtype, max_chunk, key)


def encode_heartbeat(job, wid, session, clock, key=None):
    """I am alive (sent while computing or waiting at a barrier)."""
    vals = (_uint("session", session, 64), _uint("clock", clock, 32))
    jb, wb = check_id("job", job), check_id("wid", wid)
    return _frame(HEARTBEAT, jb, wb, FIELDS[HEARTBEAT][0], vals, b"", key)
