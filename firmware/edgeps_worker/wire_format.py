"""Wire protocol v1 constants, header layout, ids, topics and HMAC (no I/O).

Imported through ``edgeps_worker.wire`` (the board's names) or
``edgeps_worker.wire_host`` (everything); split out so each module stays small.
Only what a board runs lives here: host-only helpers are in ``wire_host``.
"""

from hashlib import sha256

PROTOCOL_VERSION = 1
MAGIC = b"EP"

# message types
HELLO = 1
UPDATE = 2
PARAMS = 3
HEARTBEAT = 4
BYE = 5
MODEL = 6
REJECT = 7

# payload element types; only f32 is produced today, the others are reserved
DTYPE_F32 = 1
DTYPE_F16 = 2
DTYPE_I8 = 3
DTYPE_SIZE = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_I8: 1}

FLAG_HMAC = 0x01
HMAC_LEN = 16  # hmac-sha256 truncated to 128 bits

MODEL_STATES = ("running", "done")

MAX_ID = 32
MAX_TEXT = 2048  # model spec / reason strings, in UTF-8 bytes
MAX_MESSAGE = 1 << 20  # default bound on one encoded message (one chunk)
MAX_TOTAL = 1 << 28  # bound on the logical length announced by a chunk
DEFAULT_CHUNK = 4096

# magic, version, type, flags, job id length, worker id length, reserved,
# body length; then job id, worker id, per-type fields, body, optional tag
PREFIX = "<2sBBBBBBI"
PREFIX_LEN = 12

# per-type fixed fields, after the two ids
FIELDS = {
    HELLO: ("<IIB", ("incarnation", "max_chunk", "dtypes")),
    UPDATE: (
        "<IIIIfIfBHHII",
        (
            "incarnation",
            "seq",
            "clock",
            "base_version",
            "compute_time",
            "samples",
            "loss",
            "dtype",
            "chunk_index",
            "chunk_count",
            "chunk_size",
            "total_len",
        ),
    ),
    PARAMS: (
        "<IIBHHII",
        (
            "version",
            "seq",
            "dtype",
            "chunk_index",
            "chunk_count",
            "chunk_size",
            "total_len",
        ),
    ),
    HEARTBEAT: ("<II", ("incarnation", "clock")),
    BYE: ("<I", ("incarnation",)),
    MODEL: ("<BII", ("state", "version", "n_params")),
    REJECT: ("<I", ("seq",)),
}
# which attribute carries the UTF-8 body of text messages
TEXT_BODY = {HELLO: "model", BYE: "reason", MODEL: "model", REJECT: "reason"}
DATA_BODY = (UPDATE, PARAMS)

_ID_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"


class WireError(ValueError):
    """Bad bytes from the network; ``reason`` is a short stable token for counters."""

    def __init__(self, reason, detail=""):
        super().__init__(reason + ": " + detail if detail else reason)
        self.reason = reason


class Message:
    """One decoded message (or one chunk of a chunked UPDATE/PARAMS).

    Fields a message's type lacks read as the class defaults below; only the
    fields decode sets take room in each instance (a board decodes one per
    MQTT message).
    """

    flags = 0
    tagged = False
    incarnation = 0
    seq = 0
    clock = 0
    base_version = 0
    compute_time = 0.0
    samples = 0
    loss = float("nan")
    dtype = 0
    version = 0
    chunk_index = 0
    chunk_count = 1
    chunk_size = 0
    total_len = 0
    offset = 0
    data = b""
    reason = ""
    state = ""
    model = ""
    n_params = 0
    max_chunk = 0
    dtypes = 0

    def __init__(self, mtype, job, wid):
        self.type = mtype
        self.job = job
        self.wid = wid

    def __repr__(self):
        return "Message(type %d job=%s wid=%s)" % (self.type, self.job, self.wid)


# ---------------------------------------------------------------- ids, topics


def valid_id(s):
    """True if ``s`` is a job/worker id: 1..32 of [A-Za-z0-9_-]."""
    if not isinstance(s, str) or not 0 < len(s) <= MAX_ID:
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
    check_id("job", job)
    check_id("wid", wid)
    return "edgeps/" + job + "/up/" + wid


def topic_down(job, wid):
    """PS -> worker topic of one worker (releases, rejects)."""
    check_id("job", job)
    check_id("wid", wid)
    return "edgeps/" + job + "/down/" + wid


def topic_model(job):
    """Retained job-state topic every worker reads first."""
    check_id("job", job)
    return "edgeps/" + job + "/model"


def byte_view(data):
    """(flat writable-if-possible byte memoryview, source item size), no copy.

    CPython re-types any C-contiguous buffer (numpy arrays, array('f')); a
    MicroPython memoryview of array('f') counts items and cannot be re-typed,
    so its memory is aliased byte-wise (the caller keeps ``data`` alive).
    """
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


# ---------------------------------------------------------------- hmac

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


def same_digest(a, b):
    # constant time, so a forger learns nothing from timing
    if len(a) != len(b):
        return False
    acc = 0
    for i in range(len(a)):
        acc |= a[i] ^ b[i]
    return acc == 0
