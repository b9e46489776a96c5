"""Wire protocol v1 constants, header layout, ids, topics and HMAC (no I/O).

Imported through ``edgeps_worker.wire``; split out so each module stays small.
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
TYPE_NAMES = {
    HELLO: "hello",
    UPDATE: "update",
    PARAMS: "params",
    HEARTBEAT: "heartbeat",
    BYE: "bye",
    MODEL: "model",
    REJECT: "reject",
}

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
    """One decoded message (or one chunk of a chunked UPDATE/PARAMS)."""

    def __init__(self, mtype, job, wid):
        self.type = mtype
        self.job = job
        self.wid = wid
        self.flags = 0
        self.tagged = False
        self.incarnation = 0
        self.seq = 0
        self.clock = 0
        self.base_version = 0
        self.compute_time = 0.0
        self.samples = 0
        self.loss = float("nan")
        self.dtype = 0
        self.version = 0
        self.chunk_index = 0
        self.chunk_count = 1
        self.chunk_size = 0
        self.total_len = 0
        self.offset = 0
        self.data = b""
        self.reason = ""
        self.state = ""
        self.model = ""
        self.n_params = 0
        self.max_chunk = 0
        self.dtypes = 0

    def copy(self):
        """A shallow copy (the reassembler hands out a whole-message copy)."""
        m = Message(self.type, self.job, self.wid)
        for name in _COPY_FIELDS:
            setattr(m, name, getattr(self, name))
        return m

    def __repr__(self):
        return "Message(%s job=%s wid=%s)" % (
            TYPE_NAMES.get(self.type, "?"),
            self.job,
            self.wid,
        )


_COPY_FIELDS = (
    "flags tagged incarnation seq clock base_version compute_time samples loss dtype "
    "version chunk_index chunk_count chunk_size total_len offset data reason state "
    "model n_params max_chunk dtypes"
).split()


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


def topic_up_wildcard(job):
    """What the PS subscribes to: every worker's up topic."""
    check_id("job", job)
    return "edgeps/" + job + "/up/+"


def parse_up_topic(topic):
    """``edgeps/J/up/W`` -> ``(J, W)``; anything else -> None."""
    if isinstance(topic, (bytes, bytearray, memoryview)):
        try:
            topic = bytes(topic).decode()
        except Exception:
            return None
    if not isinstance(topic, str):
        return None
    parts = topic.split("/")
    if len(parts) != 4 or parts[0] != "edgeps" or parts[2] != "up":
        return None
    if not valid_id(parts[1]) or not valid_id(parts[3]):
        return None
    return parts[1], parts[3]


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
