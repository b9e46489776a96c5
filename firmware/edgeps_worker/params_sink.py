"""PARAMS chunks decoded straight into the trainer's parameter buffer (no full copy).

A board cannot afford to hold a whole parameter message next to its
parameter buffer, so each chunk is written to its place as it arrives and
the sink only remembers which chunks of the current release it has. It also
holds the rule for a release round's shared copy (PARAMS on
``edgeps/J/params/shared``, no worker id) and the worker's own RELEASE naming
it, which may arrive in either order (firmware/PROTOCOL.md, "Releases").
"""

from hashlib import sha256

from edgeps_worker import wire
from edgeps_worker.wire import byte_view

DIGEST_LEN = 16
OWN = 1  # a PARAMS release on the worker's down topic
SHARED = 2  # a shared copy of a release round


def params_digest(buf):
    """First 16 bytes of SHA-256 of a float32 vector's bytes: what a RELEASE names."""
    return sha256(buf).digest()[:DIGEST_LEN]


def encoded_len(code, n):
    """Bytes of n parameters in PARAMS code ``code`` (firmware/PROTOCOL.md, Dtypes)."""
    if code == wire.DTYPE_F32:
        return 4 * n
    if code == wire.DTYPE_F16:
        return 2 * n
    if code == wire.DTYPE_I8:
        return 4 * ((n + 127) // 128) + n
    return -1


class ParamsSink:
    """Receives one release at a time into ``buf`` (nbytes long, float32).

    A PARAMS release is named by its ``(version, seq)`` (seq: the UPDATE it
    answers), so two releases of one version never mix. ``add(msg)`` takes a
    decoded PARAMS chunk (the worker's own, or a shared copy: ``msg.wid`` is
    empty) or a RELEASE and returns None while nothing is complete, True when
    a release is ready (``ready`` is then ``(version, batch)``), or a short
    reason token for a message that cannot be used. Chunks are decoded by
    ``trainer.write_params(code, offset, data)`` when the trainer has it, else
    copied (F32 only). The worker holds after a release exactly the vector
    that release decodes to; an incomplete one is never used.
    """

    def __init__(self, buf, nbytes, trainer=None):
        self.buf = buf  # on MicroPython the view aliases buf without holding it
        self.view = byte_view(buf)[0]
        if len(self.view) != nbytes:
            raise ValueError("params_buffer() must hold exactly n_params float32")
        self.nbytes = nbytes
        self.n = nbytes // 4
        self._write = getattr(trainer, "write_params", None)
        self.reads = getattr(trainer, "reads", 1 << wire.DTYPE_F32)
        self.kind = 0  # what the buffer is being filled with: 0 nothing, OWN, SHARED
        self.version = -1  # version being received, -1 between releases
        self.seq = 0
        self.count = 0
        self.left = 0
        self.flags = bytearray(0)
        self.pending = None  # (version, seq, batch, digest) of a RELEASE waiting
        self.done = None  # (version, seq) of the last release used
        self.ready = (0, 0)
        self.skipped = 0  # shared chunks not taken (an own release was filling)

    def codes(self):
        """The PARAMS codes this sink reads (HELLO ``dtypes``)."""
        return [c for c in (1, 2, 3) if self.reads >> c & 1]

    def reset(self):
        """Forget a partly received release (e.g. after the link dropped)."""
        self.kind = 0
        self.version = -1
        self.pending = None
        self.done = None

    def asked(self):
        """A HELLO went out: the PS may resend the release last used."""
        self.done = None

    def add(self, msg, code=None):
        if msg.type == wire.RELEASE:
            return self._release(msg)
        if code is not None and msg.dtype != code or not self.reads >> msg.dtype & 1:
            return "params_dtype"
        count = msg.chunk_count
        if msg.total_len != encoded_len(msg.dtype, self.n) or msg.chunk_index >= count:
            return "params_length"
        kind = SHARED if not msg.wid else OWN
        if kind == SHARED and self.kind == OWN:
            self.skipped += 1  # the worker's own signed release goes first
            return None
        if kind == OWN and (msg.version, msg.seq) == self.done:
            return None  # a QoS 1 redelivery of the release already used
        if (kind, msg.version, msg.seq, count) != (
            self.kind, self.version, self.seq, self.count
        ):  # fmt: skip
            # a new release starts; an unfinished older one is abandoned
            self._start(kind, msg.version, msg.seq, count)
        i = msg.chunk_index
        if self.flags[i]:
            return None  # a QoS 1 redelivery of a chunk already written
        why = self._put(msg.dtype, msg.offset, msg.data)
        if why is not None:
            self.kind = 0
            self.version = -1
            return why
        self.flags[i] = 1
        self.left -= 1
        if self.left:
            return None
        if kind == OWN:
            return self._use(msg.version, msg.seq, msg.batch)
        p = self.pending
        if p is not None and p[0] == msg.version:
            return self._check(p)
        if p is not None and p[0] < msg.version:
            self.pending = None
            return "release_stale"  # the copy it waits for was overwritten
        return None  # the shared copy is held until a RELEASE names it

    def _start(self, kind, version, seq, count):
        self.kind = kind
        self.version = version
        self.seq = seq
        self.count = count
        self.left = count
        if len(self.flags) < count:
            self.flags = bytearray(count)
        else:
            for i in range(count):
                self.flags[i] = 0

    def _put(self, code, offset, data):
        if self._write is not None:
            try:
                self._write(code, offset, data)
            except ValueError:
                return "params_value"
            return None
        if code != wire.DTYPE_F32:
            return "params_dtype"
        self.view[offset : offset + len(data)] = data
        return None

    def _release(self, msg):
        """A RELEASE naming the shared copy at ``msg.version``."""
        if (msg.version, msg.seq) == self.done:
            return None  # a QoS 1 redelivery of a release already used
        p = (msg.version, msg.seq, msg.batch, bytes(msg.digest))
        if self.kind == OWN:
            self.kind = 0  # its missing chunks were lost: the PS moved on
            self.version = -1
        if self.kind == SHARED and self.version > msg.version:
            self.pending = None
            return "release_stale"  # its copy was overwritten by a newer one
        self.pending = p
        if self.kind == SHARED and self.version == msg.version and not self.left:
            return self._check(p)
        return None  # waits for the shared copy, up to the release timeout

    def _check(self, p):
        if params_digest(self.view) != p[3]:
            self.pending = None
            self.kind = 0
            self.version = -1
            return "release_digest"
        # the copy stays held (complete): its redelivered chunks are ignored
        return self._use(p[0], p[1], p[2], SHARED)

    def _use(self, version, seq, batch, kind=0):
        self.pending = None
        self.kind = kind
        if not kind:
            self.version = -1
        self.done = (version, seq)
        self.ready = (version, batch)
        return True
