"""PARAMS chunks decoded straight into the trainer's parameter buffer (no full copy).

A board cannot afford to hold a whole parameter message next to its
parameter buffer, so each chunk is written to its place as it arrives and
the sink only remembers which chunks of the current release it has. It also
applies the rules for a release round's shared copy (PARAMS without a worker
id) and the worker's RELEASE naming it, in either arrival order
(firmware/PROTOCOL.md, "Releases: what a worker holds").
"""

from edgeps_worker.wire import byte_view


class ParamsSink:
    """Receives one release at a time into ``buf`` (nbytes long, float32).

    A PARAMS release is named by its ``(version, seq)`` (seq: the UPDATE it
    answers), so two releases of one version never mix. ``add(msg)`` takes a
    decoded PARAMS chunk or a RELEASE and returns None while no release is
    whole, True when one is (``done`` is then its ``(version, seq, batch)``),
    or a short reason token for a message that cannot be used. Own F32
    releases are copied here; a RELEASE, a shared copy (empty ``wid``) and a
    compressed release go to ``release_round``, loaded on first use, which
    decodes through the trainer's ``write_params(code, offset, data)``.
    """

    def __init__(self, buf, nbytes, trainer=None):
        self.buf = buf  # on MicroPython the view aliases buf without holding it
        self.view = byte_view(buf)[0]
        if len(self.view) != nbytes:
            raise ValueError("params_buffer() must hold exactly n_params float32")
        self.trainer = trainer
        # the PARAMS codes it reads (bit 1 << code; F32 only), as HELLO says
        self.reads = getattr(trainer, "reads", 2)
        self.seq = 0  # -1 while a shared copy fills (or is held in) the buffer
        self.count = 0
        self.left = 0
        self.flags = bytearray(0)
        self.reset()

    def reset(self):
        """Forget a partly received release (the link dropped, a HELLO went out)."""
        self.version = -1  # version being received, -1 between releases
        self.pending = None  # (version, seq, batch, digest) of a waiting RELEASE
        self.done = None  # (version, seq, batch) of the release last used
        self.top = -1  # newest shared copy seen: older ones are replays

    def add(self, msg, f32_code=None):
        if f32_code is not None and msg.dtype != f32_code:
            return "params_dtype"
        if msg.type == 10 or not msg.wid or msg.dtype != 1:
            # a RELEASE, a shared copy or a compressed release
            from edgeps_worker import release_round

            return release_round.add(self, msg)
        d = self.done
        if d is not None and d[0] == msg.version and d[1] == msg.seq:
            return None  # a QoS 1 redelivery of the release already used
        if msg.total_len != len(self.view):
            return "params_length"  # decode checked the chunk fields against it
        count = msg.chunk_count
        data = msg.data
        start = msg.offset
        if msg.version != self.version or msg.seq != self.seq or count != self.count:
            # a new release starts; an unfinished older one is abandoned
            self.version = msg.version
            self.seq = msg.seq
            self.count = count
            self.left = count
            if len(self.flags) < count:
                self.flags = bytearray(count)
            else:
                for i in range(count):
                    self.flags[i] = 0
        i = msg.chunk_index
        if self.flags[i]:
            return None  # a QoS 1 redelivery of a chunk already written
        self.view[start : start + len(data)] = data
        self.flags[i] = 1
        self.left -= 1
        if self.left:
            return None
        self.version = -1
        self.pending = None
        self.done = (msg.version, msg.seq, msg.batch)
        return True
