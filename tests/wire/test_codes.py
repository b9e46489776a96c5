"""The codes table of the wire: lengths, records per chunk, HELLO/WELCOME fields."""

from __future__ import annotations

import struct

import pytest
from edgeps_worker import wire_host as wire


@pytest.mark.parametrize(
    ("code", "n", "k", "want"),
    [
        (wire.DTYPE_F32, 10, 0, 40),
        (wire.DTYPE_F16, 10, 0, 20),
        (wire.DTYPE_I8, 1, 0, 5),
        (wire.DTYPE_I8, 128, 0, 132),
        (wire.DTYPE_I8, 129, 0, 137),
        (wire.DTYPE_I8, 650, 0, 4 * 6 + 650),
        (wire.DTYPE_TOPK, 650, 7, 56),
    ],
)
def test_encoded_len_follows_the_spec(code: int, n: int, k: int, want: int) -> None:
    # Execute / Assert
    assert wire.encoded_len(code, n, k) == want


def test_record_table() -> None:
    assert wire.RECORD == {1: 4, 2: 2, 3: 132, 4: 8}
    assert wire.I8_BLOCK == 128 and wire.DTYPE_TOPK == 4


def _i8_body(n: int) -> bytes:
    out = bytearray()
    for b in range(0, n, wire.I8_BLOCK):
        m = min(wire.I8_BLOCK, n - b)
        out += struct.pack("<f", 0.5) + bytes((i * 7) & 0xFF for i in range(m))
    return bytes(out)


@pytest.mark.parametrize("max_chunk", [200, 400, 1000, 4096])
def test_i8_chunks_cut_on_block_boundaries(max_chunk: int) -> None:
    # Prepare
    body = _i8_body(650)

    # Execute
    chunks = wire.encode_update("j", "w", 1, 1, 0, 0, 0.0, 1, 0.0, body,
                                dtype=wire.DTYPE_I8, max_chunk=max_chunk)  # fmt: skip
    msgs = [wire.decode(c) for c in chunks]

    # Assert: chunks are whole blocks (a lone chunk too), and they join back
    assert all(m.chunk_size % 132 == 0 for m in msgs)
    assert b"".join(bytes(m.data) for m in msgs) == body
    assert all(len(c) <= max_chunk for c in chunks)


def test_topk_chunks_cut_on_records() -> None:
    # Prepare
    body = b"".join(struct.pack("<If", i * 3, float(i)) for i in range(40))

    # Execute
    chunks = wire.encode_update("j", "w", 1, 1, 0, 0, 0.0, 1, 0.0, body,
                                dtype=wire.DTYPE_TOPK, max_chunk=150)  # fmt: skip
    msgs = [wire.decode(c) for c in chunks]

    # Assert
    assert len(msgs) > 1 and all(m.chunk_size % 8 == 0 for m in msgs)
    assert b"".join(bytes(m.data) for m in msgs) == body


@pytest.mark.parametrize(
    ("code", "length"),
    [(wire.DTYPE_TOPK, 12), (wire.DTYPE_I8, 132 + 4), (wire.DTYPE_I8, 3)],
)
def test_encoder_refuses_bodies_that_are_not_whole_records(
    code: int, length: int
) -> None:
    with pytest.raises(ValueError, match="whole records"):
        wire.encode_update("j", "w", 1, 1, 0, 0, 0.0, 1, 0.0, bytes(length),
                           dtype=code)  # fmt: skip


def _raw_update(dtype: int, count: int, size: int, total: int, body: bytes) -> bytes:
    """An unsigned UPDATE chunk 0 packed field by field, whatever its lengths."""
    fields = struct.pack(wire.FIELDS[wire.UPDATE][0], 1, 1, 0, 0, 0.0, 1, 0.0, 1,
                         dtype, 0, count, size, total)  # fmt: skip
    prefix = struct.pack(
        wire.PREFIX, b"EP", wire.PROTOCOL_VERSION, wire.UPDATE, 0, 1, 1, 0, len(body)
    )
    return prefix + b"jw" + fields + body


def test_raw_update_helper_builds_what_the_encoder_builds() -> None:
    body = bytes(16)
    want = wire.encode_update("j", "w", 1, 1, 0, 0, 0.0, 1, 0.0, body,
                              dtype=wire.DTYPE_TOPK)[0]  # fmt: skip
    assert _raw_update(wire.DTYPE_TOPK, 1, 16, 16, body) == bytes(want)


@pytest.mark.parametrize(
    ("code", "count", "size", "total", "reason"),
    [
        (wire.DTYPE_TOPK, 1, 20, 20, "length"),  # not a multiple of 8
        (wire.DTYPE_I8, 1, 136, 136, "length"),  # last block: a scale, no int8
        (wire.DTYPE_F16, 1, 21, 21, "length"),
        (wire.DTYPE_I8, 2, 130, 260, "chunk"),  # a cut inside a block
        (wire.DTYPE_I8, 1, 137, 137, "chunk"),  # one chunk must be whole blocks too
        (wire.DTYPE_TOPK, 2, 12, 24, "chunk"),  # a cut inside a record
        (9, 1, 8, 8, "dtype"),
    ],
)
def test_decoder_rejects_partial_records(
    code: int, count: int, size: int, total: int, reason: str
) -> None:
    # Prepare
    raw = _raw_update(code, count, size, total, bytes(min(size, total)))

    # Execute / Assert
    with pytest.raises(wire.WireError) as exc:
        wire.decode(raw)
    assert exc.value.reason == reason


def test_hello_carries_the_codecs_mask() -> None:
    # Execute
    default = wire.decode(wire.encode_hello("j", "w", 1, 2))
    codes = wire.decode(wire.encode_hello("j", "w", 1, 2, codecs=(1, 3, 4)))
    mask = wire.decode(wire.encode_hello("j", "w", 1, 2, codecs=0b11110))

    # Assert
    assert default.codecs == 1 << wire.DTYPE_F32
    assert codes.codecs == 0b11010 and mask.codecs == 0b11110


def test_hello_refuses_unknown_codes() -> None:
    with pytest.raises(ValueError):
        wire.encode_hello("j", "w", 1, 2, codecs=(9,))
    with pytest.raises(ValueError):
        wire.encode_hello("j", "w", 1, 2, codecs=1 << 9)


def test_welcome_names_the_codec_and_its_argument() -> None:
    # Execute
    plain = wire.decode(wire.encode_welcome("j", "w", 1, 2, 3, 650, "m"))
    chunk = wire.encode_welcome("j", "w", 1, 2, 3, 650, "m", codec=4, codec_arg=7)
    topk = wire.decode(chunk)
    copied = wire.copy_message(topk)

    # Assert
    assert (plain.codec, plain.codec_arg) == (wire.DTYPE_F32, 0)
    assert (topk.codec, topk.codec_arg, topk.model) == (wire.DTYPE_TOPK, 7, "m")
    assert (copied.codec, copied.codec_arg) == (wire.DTYPE_TOPK, 7)


def test_welcome_refuses_an_unknown_codec() -> None:
    with pytest.raises(ValueError):
        wire.encode_welcome("j", "w", 1, 2, 3, 650, "m", codec=9)
