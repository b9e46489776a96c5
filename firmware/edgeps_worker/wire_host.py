"""The host's wire module: every encoder and decoder, the chunk reassembler, topics.

``from edgeps_worker import wire_host as wire`` on the host; a board imports
``edgeps_worker.wire``, which holds only what a worker sends and receives, so
none of this code takes board RAM (``edgeps flash`` does not copy this file).
Every name of ``wire`` is re-exported here. It runs on MicroPython too: the
golden byte tests check it there.
"""

import struct

from edgeps_worker.wire import (
    BYE,
    DTYPE_F16,
    DTYPE_F32,
    DTYPE_I8,
    DTYPE_TOPK,
    FIELDS,
    FLAG_HMAC,
    HEARTBEAT,
    HELLO,
    HMAC_LEN,
    I8_BLOCK,
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
    RECORD,
    REJECT,
    STOP,
    UPDATE,
    WELCOME,
    Message,
    WireError,
    _frame,
    _plan,
    _uint,
    check_id,
    chunk_frame,
    encode_heartbeat,
    encoded_len,
    hmac_sha256,
    topic_down,
    topic_model,
    topic_up,
    update_plan,
    valid_id,
)
from edgeps_worker.wire import decode as _decode
from edgeps_worker.wire_card import (
    WELCOME_HEAD,
    WELCOME_HEAD_LEN,
    _hello_body,
    _welcome_body,
    encode_welcome,
    welcome_head,
)
from edgeps_worker.wire_join import _text, encode_bye
from edgeps_worker.wire_join import encode_hello as _encode_hello

DEFAULT_CHUNK = 4096
MAX_ID = 32
RELEASE = 10  # a board names it by number (wire.FIELDS[10]): no RAM for a global
# bytes per element of the dense codes (I8: the int8, without the scales)
DTYPE_SIZE = {DTYPE_F32: 4, DTYPE_F16: 2, DTYPE_I8: 1}
CODE_NAMES = {DTYPE_F32: "f32", DTYPE_F16: "f16", DTYPE_I8: "int8", DTYPE_TOPK: "topk"}

TYPE_NAMES = {
    HELLO: "hello",
    UPDATE: "update",
    PARAMS: "params",
    HEARTBEAT: "heartbeat",
    BYE: "bye",
    MODEL: "model",
    REJECT: "reject",
    WELCOME: "welcome",
    STOP: "stop",
    RELEASE: "release",
}

# ---------------------------------------------------------------- topics


def topic_params(job):
    """Shared PARAMS of a release round (the board worker spells it out itself)."""
    return "edgeps/" + check_id("job", job).decode() + "/params/shared"


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


# ---------------------------------------------------------------- encoders (PS)


def code_mask(codes):
    """A HELLO mask (bit ``1 << code``) from codes or an int mask (None: F32 only)."""
    if codes is None:
        return 1 << DTYPE_F32
    if isinstance(codes, int):
        mask = _uint("mask", codes, 8)  # a bool is refused there
        for c in range(8):
            if mask >> c & 1 and c not in RECORD:
                raise ValueError("unknown dtype %r in mask 0x%x" % (c, mask))
        return mask
    mask = 0
    for c in codes:
        if c not in RECORD:
            raise ValueError("unknown dtype %r" % (c,))
        mask |= 1 << c
    return mask


def encode_hello(job, wid, instance, nonce, model="", max_chunk=DEFAULT_CHUNK,
                 dtypes=None, max_batch=0, key=None, codecs=None,
                 moments=None):  # fmt: skip
    """wire.encode_hello taking ``dtypes`` and ``codecs`` as codes or masks."""
    dmask, cmask = code_mask(dtypes), code_mask(codecs)
    return _encode_hello(job, wid, instance, nonce, model, max_chunk, dmask,
                         max_batch, key, cmask, moments)  # fmt: skip


def decode(buf, key=None, max_len=MAX_MESSAGE):
    """wire.decode, with HELLO's and WELCOME's bodies parsed: HELLO's ``model``
    and ``moments`` (None or (rows, means, variances)); WELCOME's ``model``,
    ``scale`` (None or (offsets, inverse stds)) and ``classes`` (None or names)."""
    msg = _decode(buf, key, max_len)
    if msg.type == HELLO:
        _hello_body(msg)
    elif msg.type == WELCOME:
        _welcome_body(msg)
    return msg


def _gen(plan):
    # the framed chunks of a wire._plan, which checked everything eagerly
    for i in range(plan[0]):
        yield chunk_frame(None, 0, plan, i)


def iter_update(*args, **kwargs):
    """Like encode_update but yields chunks one by one (``wire.update_plan``'s)."""
    return _gen(update_plan(*args, **kwargs))


def encode_update(job, wid, session, seq, clock, base_version, compute_time,
                  samples, loss, data, dtype=DTYPE_F32, max_chunk=DEFAULT_CHUNK,
                  key=None, steps=1):  # fmt: skip
    """A gradient (``steps`` 1) or the delta of ``steps`` local SGD steps pushed
    by a worker, as a list of chunks of at most max_chunk bytes."""
    return list(iter_update(job, wid, session, seq, clock, base_version,
                            compute_time, samples, loss, data, dtype, max_chunk,
                            key, steps))  # fmt: skip


def iter_params(job, wid, run, session, version, data, max_chunk=DEFAULT_CHUNK,
                seq=0, dtype=DTYPE_F32, key=None, batch=0):  # fmt: skip
    """Like encode_params but yields chunks one by one."""
    head = (
        _uint("run", run, 64),
        _uint("session", session, 64),
        _uint("version", version, 32),
        _uint("seq", seq, 32),
        _uint("batch", batch, 16),
    )
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _gen(_plan(PARAMS, jb, wb, FIELDS[PARAMS][0], head, data, dtype, max_chunk,
                      key))  # fmt: skip


def encode_params(job, wid, run, session, version, data, max_chunk=DEFAULT_CHUNK,
                  seq=0, dtype=DTYPE_F32, key=None, batch=0):  # fmt: skip
    """Parameters at ``version`` sent to one worker's session (its release), as chunks.

    ``seq`` is the seq of the UPDATE this release answers (0 when it answers
    none, as after a HELLO); with ``version`` it names the release, so a
    board never mixes the chunks of two releases. ``batch`` is the batch size
    the PS asks for (0: the worker keeps its own).
    """
    return list(iter_params(job, wid, run, session, version, data, max_chunk, seq,
                            dtype, key, batch))  # fmt: skip


def iter_shared_params(job, run, version, data, max_chunk=DEFAULT_CHUNK, dtype=1):
    """Parameters at ``version`` for every worker of a release round, as chunks.

    Published once on ``topic_params(job)``: no worker id, session, seq or
    batch (all 0) and no HMAC tag; each worker's RELEASE carries the digest of
    the vector it decodes to, signed with that worker's key."""
    head = (_uint("run", run, 64), 0, _uint("version", version, 32), 0, 0)
    fmt = FIELDS[PARAMS][0]
    return _gen(
        _plan(
            PARAMS, check_id("job", job), b"", fmt, head, data, dtype, max_chunk, None
        )
    )


def encode_shared_params(job, run, version, data, max_chunk=DEFAULT_CHUNK, dtype=1):
    """iter_shared_params as a list."""
    return list(iter_shared_params(job, run, version, data, max_chunk, dtype))


def encode_release(job, wid, run, session, version, digest, seq=0, batch=0, key=None):
    """A worker's release: the shared PARAMS at ``version`` (iter_shared_params);
    ``digest``: first 16 bytes of SHA-256 of the float32 vector it decodes to."""
    if not isinstance(digest, (bytes, bytearray)) or len(digest) != 16:
        raise ValueError("digest must be 16 bytes")
    vals = (
        _uint("run", run, 64),
        _uint("session", session, 64),
        _uint("version", version, 32),
        _uint("seq", seq, 32),
        _uint("batch", batch, 16),
        bytes(digest),
    )
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _frame(RELEASE, jb, wb, FIELDS[RELEASE][0], vals, b"", key)


def encode_model(job, run, state, model, version, n_params):
    """Retained job state (informational, unsigned): run, state, spec, version, size."""
    if state not in MODEL_STATES:
        raise ValueError("state must be one of %r, got %r" % (MODEL_STATES, state))
    vals = (
        _uint("run", run, 64),
        MODEL_STATES.index(state),
        _uint("version", version, 32),
        _uint("n_params", n_params, 32),
    )
    jb = check_id("job", job)
    return _frame(MODEL, jb, b"", FIELDS[MODEL][0], vals, _text("model", model), None)


def encode_reject(job, wid, run, session, seq, reason, key=None):
    """The PS tells a worker's session it dropped its update ``seq`` and why."""
    vals = (_uint("run", run, 64), _uint("session", session, 64), _uint("seq", seq, 32))
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _frame(REJECT, jb, wb, FIELDS[REJECT][0], vals, _text("reason", reason), key)


def encode_stop(job, wid, run, session, reason, key=None):
    """The one message that ends a worker: its session (or HELLO nonce) and why."""
    vals = (_uint("run", run, 64), _uint("session", session, 64))
    jb = check_id("job", job)
    wb = check_id("wid", wid)
    return _frame(STOP, jb, wb, FIELDS[STOP][0], vals, _text("reason", reason), key)


# ---------------------------------------------------------------- reassembly

_COPY_FIELDS = (
    "flags tagged session seq clock base_version compute_time samples loss dtype "
    "version chunk_index chunk_count chunk_size total_len offset data reason state "
    "model n_params max_chunk dtypes run nonce instance max_batch batch codecs codec "
    "codec_arg steps"
).split()


def copy_message(msg):
    """A shallow copy of a decoded Message (the reassembler hands out one)."""
    m = Message(msg.type, msg.job, msg.wid)
    for name in _COPY_FIELDS:
        value = getattr(msg, name, _NONE)
        if value is not _NONE:  # codecs, codec, codec_arg: only where decoded
            setattr(m, name, value)
    return m


_NONE = object()


class _Partial:
    """The chunks of one logical message seen so far."""

    def __init__(self, msg, now):
        self.first = msg
        self.t0 = now
        self.buf = bytearray(msg.total_len)
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
        getattr(msg, "steps", 0),  # UPDATE's only
        msg.batch,
        struct.pack("<ff", msg.compute_time, msg.loss),
    )


class Reassembler:
    """Joins chunked UPDATE/PARAMS messages with bounded memory and age (the PS's).

    ``max_bytes`` bounds one message, ``max_pending`` the number of partial
    messages held at once (the oldest is evicted), ``max_age`` (seconds, same
    clock as ``now``) how long a partial may wait for its missing chunks. A
    board does not reassemble: its ``params_sink.ParamsSink`` writes each
    PARAMS chunk straight into the parameter buffer.
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
        """Bytes reserved by partial messages."""
        n = 0
        for p in self._pending.values():
            n += len(p.buf)
        return n

    def expire(self, now):
        """Drop partial messages older than max_age; returns how many."""
        old = [k for k, p in self._pending.items() if now - p.t0 > self.max_age]
        for k in old:
            del self._pending[k]
        self.expired += len(old)
        return len(old)

    def add(self, msg, now):
        """Feed one decoded message; returns the whole message once complete.

        Messages that are not chunked come straight back; the others return
        None until their last chunk, then a copy of the first chunk's message
        whose ``data`` is the joined payload (a bytearray). Chunks that
        disagree or exceed the bounds raise WireError.
        """
        if msg.type != UPDATE and msg.type != PARAMS:
            return msg
        self.expire(now)
        total = msg.total_len
        if total > self.max_bytes:
            raise WireError("size", "%d > %d bytes" % (total, self.max_bytes))
        if msg.chunk_count == 1:
            return msg
        if msg.type == UPDATE:
            key = (UPDATE, msg.job, msg.wid, msg.session, msg.seq)
        else:
            key = (PARAMS, msg.job, msg.wid, msg.run, msg.session, msg.version, msg.seq)
        part = self._pending.get(key)
        if part is None:
            if key in self._done:
                self.duplicates += 1
                return None
            part = self._start(key, msg, now)
        elif _meta(msg) != part.meta:
            del self._pending[key]
            raise WireError("chunk", "chunks of one message disagree")
        i = msg.chunk_index
        bit = 1 << (i & 7)
        if part.seen[i >> 3] & bit:
            self.duplicates += 1
            return None
        part.seen[i >> 3] |= bit
        part.buf[msg.offset : msg.offset + len(msg.data)] = msg.data
        part.missing -= 1
        if part.missing:
            return None
        del self._pending[key]
        self._done.append(key)
        if len(self._done) > 2 * self.max_pending + 8:
            self._done.pop(0)
        whole = copy_message(part.first)
        whole.chunk_index = 0
        whole.chunk_count = 1
        whole.chunk_size = total
        whole.offset = 0
        whole.data = part.buf  # pyright: ignore[reportAttributeAccessIssue]
        return whole

    def _start(self, key, msg, now):
        while len(self._pending) >= self.max_pending:
            oldest = None
            for k, p in self._pending.items():
                if oldest is None or p.t0 < self._pending[oldest].t0:
                    oldest = k
            del self._pending[oldest]
            self.evicted += 1
        part = _Partial(msg, now)
        self._pending[key] = part
        return part


__all__ = [
    "BYE", "CODE_NAMES", "DEFAULT_CHUNK", "DTYPE_F16", "DTYPE_F32", "DTYPE_I8",
    "DTYPE_SIZE", "DTYPE_TOPK", "FLAG_HMAC", "HEARTBEAT", "HELLO", "HMAC_LEN",
    "I8_BLOCK", "MAGIC", "MAX_ID", "MAX_MESSAGE", "MAX_TEXT", "MAX_TOTAL", "MODEL",
    "MODEL_STATES", "Message", "PARAMS", "PREFIX", "PREFIX_LEN", "PROTOCOL_VERSION",
    "RECORD", "REJECT", "RELEASE", "Reassembler", "STOP", "TYPE_NAMES", "UPDATE",
    "WELCOME", "WELCOME_HEAD", "WELCOME_HEAD_LEN", "WireError", "code_mask",
    "copy_message", "decode", "encode_bye",
    "encode_heartbeat", "encode_hello", "encode_model", "encode_params",
    "encode_reject", "encode_release", "encode_shared_params", "encode_stop",
    "encode_update", "encode_welcome", "encoded_len", "hmac_sha256", "iter_params",
    "iter_shared_params", "iter_update", "parse_up_topic", "topic_down", "topic_model",
    "topic_params", "topic_up", "topic_up_wildcard", "valid_id", "welcome_head",
]  # fmt: skip
