"""A release round on the board: a shared PARAMS copy and the RELEASE naming it.

``params_sink.ParamsSink`` writes a shared copy's chunks like its own and
calls in here when one completes or a RELEASE arrives (the rules are in
firmware/PROTOCOL.md, "Releases: what a worker holds"). Imported on first
use, so a worker whose releases all come on its down topic never loads it.
"""

from hashlib import sha256


def add(s, msg):
    """A shared PARAMS chunk or the worker's RELEASE, for sink ``s``."""
    if msg.type == 10:  # RELEASE
        return on_release(s, msg)
    if s.kind == 1:
        return None  # the worker's own signed release goes first
    done = s.chunk(msg, 2)
    if done is True:
        return on_copy(s, msg.version)
    return done


def on_copy(s, version):
    """A shared copy at ``version`` is complete in the buffer of sink ``s``."""
    p = s.pending
    if p is not None and p[0] == version:
        return _check(s, p)
    if p is not None and p[0] < version:
        s.pending = None
        return "release_stale"  # the copy it waits for was overwritten
    return None  # the shared copy is held until a RELEASE names it


def on_release(s, msg):
    """The worker's own RELEASE: use the held copy, or wait for it."""
    d = s.done
    if d is not None and d[0] == msg.version and d[1] == msg.seq:
        return None  # a QoS 1 redelivery of a release already used
    if s.kind == 1:
        s.kind = 0  # an own release's missing chunks were lost: the PS moved on
        s.version = -1
    if s.kind == 2 and s.version > msg.version:
        s.pending = None
        return "release_stale"  # its copy was overwritten by a newer one
    p = (msg.version, msg.seq, msg.batch, bytes(msg.digest))
    s.pending = p
    if s.kind == 2 and s.version == msg.version and not s.left:
        return _check(s, p)
    return None  # waits for the shared copy, up to the release timeout


def _check(s, p):
    s.pending = None
    if sha256(s.view).digest()[:16] != p[3]:
        s.kind = 0
        s.version = -1
        return "release_digest"
    # the copy stays held (complete): its redelivered chunks change nothing
    s.done = (p[0], p[1], p[2])
    return True
