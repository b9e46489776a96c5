"""PARAMS chunks decoded straight into the trainer's parameter buffer (no full copy).

A board cannot afford to hold a whole parameter message next to its
parameter buffer, so each chunk is written to its place as it arrives and
the sink only remembers which chunks of the current release it has. It also
applies the rules for a release round's shared copy (PARAMS without a worker
id) and the worker's RELEASE naming it, in either arrival order
(firmware/PROTOCOL.md, "Releases: what a worker holds").
"""

from edgeps_worker.wire import byte_view, encoded_len


class ParamsSink:
    """Receives one release at a time into ``buf`` (nbytes long, float32).

    A PARAMS release is named by its ``(version, seq)`` (seq: the UPDATE it
    answers), so two releases of one version never mix. ``add(msg)`` takes a
    decoded PARAMS chunk (the worker's own, or a shared copy: empty ``wid``)
    or a RELEASE and returns None while no release is whole, True when one is
    (``done`` is then its ``(version, seq, batch)``), or a short reason token
    for a message that cannot be used. Chunks go through the trainer's
    ``write_params(code, offset, data)`` when it has one, else are copied
    (F32, the only code read without it).
    """

    def __init__(self, buf, nbytes, trainer=None):
        self.buf = buf  # on MicroPython the view aliases buf without holding it
        self.view = byte_view(buf)[0]
        if len(self.view) != nbytes:
            raise ValueError("params_buffer() must hold exactly n_params float32")
        self.nbytes = nbytes
        self._write = getattr(trainer, "write_params", None)
        # the PARAMS codes it reads (bit 1 << code; F32 only), as HELLO says
        self.reads = getattr(trainer, "reads", 2)
        self.flags = bytearray(0)
        self.reset()

    def reset(self):
        """Forget a partly received release (the link dropped, a HELLO went out)."""
        self.kind = 0  # what fills the buffer: 0 nothing, 1 own PARAMS, 2 shared
        self.version = -1  # version being received, -1 between releases
        self.seq = self.count = self.left = 0
        self.pending = None  # (version, seq, batch, digest) of a waiting RELEASE
        self.done = None  # (version, seq, batch) of the release last used

    def add(self, msg, code=None):
        if msg.type == 10 or not msg.wid:  # a RELEASE, or a shared copy
            from edgeps_worker import release_round  # loaded on first use

            return release_round.add(self, msg)
        if code is not None and msg.dtype != code:
            return "params_dtype"
        d = self.done
        if d is not None and d[0] == msg.version and d[1] == msg.seq:
            return None  # a QoS 1 redelivery of the release already used
        r = self.chunk(msg, 1)
        if r is True:
            self.kind = 0
            self.version = -1
            self.pending = None
            self.done = (msg.version, msg.seq, msg.batch)
        return r

    def chunk(self, msg, kind):
        """Write one chunk of an own (kind 1) or shared (2) PARAMS; True when whole."""
        d = msg.dtype
        if not self.reads >> d & 1:
            return "params_dtype"
        if msg.total_len != encoded_len(d, self.nbytes >> 2):
            return "params_length"
        count = msg.chunk_count
        if kind != self.kind or (msg.version, msg.seq, count) != (
            self.version, self.seq, self.count
        ):  # fmt: skip
            # a new release starts; an unfinished older one is abandoned
            self.kind = kind
            self.version = msg.version
            self.seq = msg.seq
            self.count = self.left = count
            if len(self.flags) < count:
                self.flags = bytearray(count)
            else:
                for i in range(count):
                    self.flags[i] = 0
        i = msg.chunk_index
        if self.flags[i]:
            return None  # a QoS 1 redelivery of a chunk already written
        data = msg.data
        start = msg.offset
        try:
            if self._write is not None:
                self._write(d, start, data)
            else:
                self.view[start : start + len(data)] = data
        except ValueError:
            self.kind = 0
            self.version = -1
            return "params_value"
        self.flags[i] = 1
        self.left -= 1
        return None if self.left else True
