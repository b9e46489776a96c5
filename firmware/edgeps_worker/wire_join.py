"""The messages a worker sends to join and leave: HELLO and BYE (and the text
fields they carry).

A board sends them once per link or per re-HELLO, from ``worker_link``, so
they live apart from ``wire``: ``worker_link`` imports this module for each
message and unloads it after (never while ``mqtt_open`` connects), so its
code is off the heap between uses. ``wire_host`` re-exports them.
"""

import struct

from edgeps_worker.wire import BYE, FIELDS, HELLO, MAX_TEXT, _frame, _uint, check_id


def _text(name, s):
    if not isinstance(s, str):
        raise TypeError("%s must be a str" % name)
    b = s.encode()
    if len(b) > MAX_TEXT:
        raise ValueError("%s longer than %d bytes" % (name, MAX_TEXT))
    return b


def encode_hello(job, wid, instance, nonce, model="", max_chunk=4096,
                 dtypes=None, max_batch=0, key=None, codecs=None,
                 moments=None):  # fmt: skip
    """A worker asks to join: ``instance`` names its process, ``nonce`` its link;
    ``dtypes``/``codecs``: masks (bit ``1 << code``) of the PARAMS codes it reads
    and the UPDATE codes it makes (None: F32). ``moments``: None, or (rows,
    per-feature means, per-feature variances) of its local data, from which the
    PS may build the job's scaler. ``wire_host``'s takes codes too."""
    m = 0
    body = _text("model", model)
    if moments:
        rows, mean, var = moments
        m = len(mean)
        if len(var) != m or not 0 < m < 65536:
            raise ValueError("moments: mean and var of 1..65535 features")
        fmt = "<%df" % m
        body = struct.pack("<I", _uint("rows", rows, 32)) + struct.pack(
            fmt, *mean) + struct.pack(fmt, *var) + body  # fmt: skip
    vals = (_uint("instance", instance, 64), _uint("nonce", nonce, 64),
            _uint("max_chunk", max_chunk, 32), _uint("dtypes", dtypes or 2, 8),
            _uint("max_batch", max_batch, 16),
            _uint("codecs", codecs or 2, 8))  # fmt: skip
    jb, wb = check_id("job", job), check_id("wid", wid)
    body = struct.pack("<H", m) + body  # the body's head: moments' features
    return _frame(HELLO, jb, wb, FIELDS[HELLO][0], vals, body, key)


def encode_bye(job, wid, nonce, reason, key=None):
    """A worker leaves ("bye") or its last will fires ("lost"); ``nonce``: its link."""
    vals = (_uint("nonce", nonce, 64),)
    jb, wb = check_id("job", job), check_id("wid", wid)
    return _frame(BYE, jb, wb, FIELDS[BYE][0], vals, _text("reason", reason), key)
