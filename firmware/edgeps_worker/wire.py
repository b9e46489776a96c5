"""edgeps wire protocol v1 as a board uses it: pure encode/decode, shared with the host.

Runs unchanged on MicroPython 1.2x and CPython 3.10+: no I/O, no typing at
runtime, explicit little-endian ``struct`` formats. The byte layout is
documented field by field in firmware/PROTOCOL.md; the code lives in
wire_format (layout, ids, topics, HMAC), wire_encode (what a worker sends)
and wire_decode. Only those names are here, so a board loads no more code
than it runs; the host's encoders and the reassembler are in ``wire_host``.
"""

from edgeps_worker.wire_decode import decode
from edgeps_worker.wire_encode import (
    encode_bye,
    encode_heartbeat,
    encode_hello,
    iter_update,
)
from edgeps_worker.wire_format import (
    BYE,
    DEFAULT_CHUNK,
    DTYPE_F16,
    DTYPE_F32,
    DTYPE_I8,
    DTYPE_SIZE,
    FLAG_HMAC,
    HEARTBEAT,
    HELLO,
    HMAC_LEN,
    MAGIC,
    MAX_ID,
    MAX_MESSAGE,
    MAX_TEXT,
    MAX_TOTAL,
    MODEL,
    MODEL_STATES,
    PARAMS,
    PREFIX,
    PREFIX_LEN,
    PROTOCOL_VERSION,
    REJECT,
    UPDATE,
    Message,
    WireError,
    hmac_sha256,
    topic_down,
    topic_model,
    topic_up,
    valid_id,
)

__all__ = [
    "BYE",
    "DEFAULT_CHUNK",
    "DTYPE_F16",
    "DTYPE_F32",
    "DTYPE_I8",
    "DTYPE_SIZE",
    "FLAG_HMAC",
    "HEARTBEAT",
    "HELLO",
    "HMAC_LEN",
    "MAGIC",
    "MAX_ID",
    "MAX_MESSAGE",
    "MAX_TEXT",
    "MAX_TOTAL",
    "MODEL",
    "MODEL_STATES",
    "PARAMS",
    "PREFIX",
    "PREFIX_LEN",
    "PROTOCOL_VERSION",
    "REJECT",
    "UPDATE",
    "Message",
    "WireError",
    "decode",
    "encode_bye",
    "encode_heartbeat",
    "encode_hello",
    "hmac_sha256",
    "iter_update",
    "topic_down",
    "topic_model",
    "topic_up",
    "valid_id",
]
