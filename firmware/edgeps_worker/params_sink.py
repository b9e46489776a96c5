"""PARAMS chunks copied straight into the trainer's parameter buffer (no full copy).

A board cannot afford to hold a whole parameter message next to its
parameter buffer, so each chunk is written to its place as it arrives and
the sink only remembers which chunks of the current release it has.
"""

from edgeps_worker.wire import byte_view, encoded_len


class ParamsSink:
    """Reassembles one release at a time into ``buf`` (nbytes long).

    A release is named by its PARAMS ``(version, seq)`` (seq: the UPDATE it
    answers), so two releases of one version never mix. ``add(msg)`` takes
    a decoded PARAMS chunk and returns None while the release is incomplete,
    True when it just completed, or a short reason token for a chunk that
    cannot belong to this buffer. Chunks of other codes than F32 go through
    the ``trainer``'s ``write_params(code, offset, data)`` when it has one.
    """

    def __init__(self, buf, nbytes, trainer=None):
        self.buf = buf  # on MicroPython the view aliases buf without holding it
        self.write = getattr(trainer, "write_params", None)
        self.view = byte_view(buf)[0]
        if len(self.view) != nbytes:
            raise ValueError("params_buffer() must hold exactly n_params float32")
        self.nbytes = nbytes
        self.version = -1  # version being received, -1 between releases
        self.seq = 0
        self.count = 0
        self.left = 0
        self.flags = bytearray(0)

    def reset(self):
        """Forget a partly received release (e.g. after the link dropped)."""
        self.version = -1

    def add(self, msg, f32_code=1):
        count = msg.chunk_count
        data = msg.data
        size = len(data)
        total = self.nbytes
        if msg.dtype != f32_code:
            if self.write is None:
                return "params_dtype"
            total = encoded_len(msg.dtype, self.nbytes // 4)
        if msg.total_len != total or count <= 0 or msg.chunk_index >= count:
            return "params_length"
        start = msg.offset
        if start < 0 or start + size > total:
            return "params_chunk"
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
        write = self.write
        if write is None or msg.dtype == f32_code:
            self.view[start : start + size] = data
        else:
            try:
                write(msg.dtype, start, data)
            except ValueError:
                return "params_value"
        self.flags[i] = 1
        self.left -= 1
        if self.left:
            return None
        self.version = -1
        return True
