"""The RELEASE messages of one round, byte for byte ``wire_host.encode_release``'s.

A BSP round at 1,000 workers encodes 1,000 RELEASEs that differ only in the
worker id, session, seq, batch and tag. ``wire_host.encode_release`` (shared
with MicroPython, so plain Python) checks and frames every field of every one,
and its HMAC keeps 8 keys' pads, so with a key per worker it derives them again
for each message. `ReleaseFrames` checks the round's fields once, packs each
message with two precompiled structs, and signs with the standard library's
``hmac.digest`` (RFC 2104 HMAC-SHA256, as ``wire.hmac_sha256``). The golden
tests (tests/runtime/test_release_frames.py) compare its bytes with the wire module's.
"""

from __future__ import annotations

import hmac
import re
import struct

from edgeps_worker import wire_host as wire

_PREFIX = struct.Struct(wire.PREFIX)
_FIELDS = struct.Struct(wire.FIELDS[wire.RELEASE][0])
_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
_U64, _U32, _U16 = 1 << 64, 1 << 32, 1 << 16


class ReleaseFrames:
    """Encode the RELEASEs of one round: run, version and digest fixed."""

    def __init__(self, job: str, run: int, version: int, digest: bytes) -> None:
        if not isinstance(digest, (bytes, bytearray)) or len(digest) != 16:
            raise ValueError("digest must be 16 bytes")
        for name, value, bits in (("run", run, 64), ("version", version, 32)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {value!r}")
            if value < 0 or value >> bits:
                raise ValueError(f"{name} out of range for u{bits}: {value}")
        self._jb = wire.check_id("job", job)
        self._run = run
        self._version = version
        self._digest = bytes(digest)

    def encode(
        self,
        wid: str,
        session: int,
        seq: int = 0,
        batch: int = 0,
        key: bytes | None = None,
    ) -> bytes:
        """One worker's RELEASE; ValueError/TypeError as ``encode_release``."""
        if not isinstance(wid, str) or _ID.fullmatch(wid) is None:
            raise ValueError(f"wid must be 1..32 of [A-Za-z0-9_-], got {wid!r}")
        for name, value in (("session", session), ("seq", seq), ("batch", batch)):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{name} must be an int, got {value!r}")
        if not (0 <= session < _U64 and 0 <= seq < _U32 and 0 <= batch < _U16):
            raise ValueError(
                f"session, seq or batch out of range: {session, seq, batch}"
            )
        wb = wid.encode()
        jb = self._jb
        flags = wire.FLAG_HMAC if key else 0
        head = _PREFIX.pack(
            wire.MAGIC,
            wire.PROTOCOL_VERSION,
            wire.RELEASE,
            flags,
            len(jb),
            len(wb),
            0,
            0,
        )
        fields = _FIELDS.pack(
            self._run, session, self._version, seq, batch, self._digest
        )
        msg = b"".join((head, jb, wb, fields))
        if not key:
            return msg
        return msg + hmac.digest(key, msg, "sha256")[: wire.HMAC_LEN]
