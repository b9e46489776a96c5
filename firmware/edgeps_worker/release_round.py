"""A release round and compressed releases on the board (loaded on first use).

``params_sink.ParamsSink`` copies the worker's own F32 releases itself and
hands the rest here: a shared PARAMS copy (no worker id), the RELEASE naming
it, and PARAMS in F16 or I8, decoded through the trainer's
``write_params(code, offset, data)``. The rules are in firmware/PROTOCOL.md
("Releases: what a worker holds"). A worker whose releases all come whole in
F32 on its down topic never loads this module.
"""

from hashlib import sha256

from edgeps_worker.wire import encoded_len


def add(s, msg):
    """A shared PARAMS chunk, a compressed own one or a RELEASE, for sink ``s``."""
    if msg.type == 10:  # RELEASE
        return on_release(s, msg)
    d = msg.dtype
    if not s.reads >> d & 1:
        return "params_dtype"
    if msg.total_len != encoded_len(d, len(s.view) >> 2):
        return "params_length"
    shared = not msg.wid
    if shared:
        if msg.version < s.top:
            return None  # older than a copy already seen: a replay, never used
        s.top = msg.version
        if s.left and s.seq >= 0 and s.version >= 0:
            return None  # the worker's own signed release goes first
    if not shared:
        p = s.done
        if p is not None and p[0] == msg.version and p[1] == msg.seq:
            return None  # a QoS 1 redelivery of the release already used
    # a shared copy fills the buffer under seq -1, which no own release has
    seq = -1 if shared else msg.seq
    count = msg.chunk_count
    if (msg.version, seq, count) != (s.version, s.seq, s.count):
        s.version = msg.version  # a new release; an unfinished one is abandoned
        s.seq = seq
        s.count = s.left = count
        if len(s.flags) < count:
            s.flags = bytearray(count)
        else:
            for i in range(count):
                s.flags[i] = 0
    i = msg.chunk_index
    if s.flags[i]:
        return None  # a QoS 1 redelivery of a chunk already written
    data = msg.data
    start = msg.offset
    write = getattr(s.trainer, "write_params", None)
    try:
        if write is not None:
            write(d, start, data)
        else:
            s.view[start : start + len(data)] = data  # F32: a plain copy
    except ValueError:
        s.version = -1
        return "params_value"
    s.flags[i] = 1
    s.left -= 1
    if s.left:
        return None
    if not shared:
        s.version = -1
        s.pending = None
        s.done = (msg.version, msg.seq, msg.batch)
        return True
    p = s.pending
    if p is not None and p[0] == msg.version:
        return _check(s, p)
    if p is not None and p[0] < msg.version:
        s.pending = None
        return "release_stale"  # the copy it waits for was overwritten
    return None  # the shared copy is held until a RELEASE names it


def on_release(s, msg):
    """The worker's own RELEASE: use the held shared copy, or wait for it."""
    p = s.done
    if p is not None and p[0] == msg.version and p[1] == msg.seq:
        return None  # a QoS 1 redelivery of a release already used
    v = msg.version
    if p is not None and v < p[0]:
        return None  # older than the release last used: a replay
    if s.seq >= 0:
        s.version = -1  # an own release's missing chunks were lost: the PS moved on
    p = (v, msg.seq, msg.batch, bytes(msg.digest))
    if s.seq < 0 and s.version == v:  # its copy is held or filling
        s.pending = p
        return None if s.left else _check(s, p)
    s.pending = None
    if s.top >= v:
        # its copy came and went (overwritten, skipped or refused): missing
        return "release_stale"
    s.pending = p
    return None  # waits for the shared copy, up to the release timeout


def _check(s, p):
    s.pending = None
    if sha256(s.view).digest()[:16] != p[3]:
        s.version = -1
        s.done = (p[0], p[1], p[2])  # settled: its redelivery asks nothing again
        return "release_digest"
    # the copy stays held (complete): its redelivered chunks change nothing
    s.done = (p[0], p[1], p[2])
    return True
