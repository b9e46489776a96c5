"""Every kind of bad input to wire.decode raises WireError with a stable reason."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from edgeps_worker import wire_host as wire
from hypothesis import given, settings
from hypothesis import strategies as st

UPD = wire.encode_update("job1", "w1", 2, 5, 3, 9, 0.5, 32, 0.25, b"\0" * 8)[0]
HB = wire.encode_heartbeat("job1", "w1", 2, 3)
BYE = wire.encode_bye("job1", "w1", 2, "lost")
MODEL = wire.encode_model("job1", 1, "running", "m", 1, 2)
MODEL_WITH_WID = (
    struct.pack(wire.PREFIX, b"EP", wire.PROTOCOL_VERSION, wire.MODEL, 0, 4, 1, 0, 1)
    + b"job1w"
    + struct.pack("<QBII", 1, 0, 1, 2)
    + b"m"
)
# offset of the UPDATE type fields: prefix + "job1" + "w1"
F = wire.PREFIX_LEN + 6


def _patch(buf: bytes, offset: int, fmt: str, value: object) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def _reason(buf: object, **kw: object) -> str:
    with pytest.raises(wire.WireError) as e:
        wire.decode(buf, **kw)  # type: ignore[arg-type]
    return e.value.reason


@pytest.mark.parametrize(
    ("buf", "reason"),
    [
        (b"", "short"),
        (b"EP\x01", "short"),
        (b"XX" + UPD[2:], "magic"),
        (_patch(UPD, 2, "<B", 1), "version"),  # protocol v1
        (_patch(UPD, 2, "<B", 2), "version"),  # protocol v2
        (_patch(UPD, 2, "<B", 4), "version"),
        (_patch(UPD, 3, "<B", 0), "type"),
        (_patch(UPD, 3, "<B", 11), "type"),  # 10 is RELEASE
        (_patch(UPD, 4, "<B", 0x02), "flags"),
        (UPD + b"\0", "length"),
        (_patch(HB, 8, "<I", 1) + b"x", "length"),  # a heartbeat has no body
        (_patch(UPD, 8, "<I", 0xFFFFFFFF), "short"),  # body_len beyond the buffer
        (_patch(UPD, wire.PREFIX_LEN + 4, "<B", ord("/")), "id"),
        (_patch(_patch(UPD, 5, "<B", 0), 6, "<B", 6), "id"),  # empty job id
        (MODEL_WITH_WID, "id"),
        (_patch(MODEL, wire.PREFIX_LEN + 12, "<B", 7), "value"),  # unknown state
        (BYE[:-4] + b"\xff\xfe\xfd\xfc", "text"),
        (_patch(UPD, F + 20, "<f", float("nan")), "value"),  # compute_time
        (_patch(UPD, F + 20, "<f", -1.0), "value"),
        (_patch(UPD, F + 34, "<B", 9), "dtype"),
        (_patch(UPD, F + 35, "<H", 1), "chunk"),  # index 1 of 1
        (_patch(UPD, F + 37, "<H", 2), "chunk"),  # count disagrees with sizes
        (_patch(UPD, F + 39, "<I", 6), "chunk"),  # chunk size not whole f32s
        (_patch(UPD, F + 43, "<I", 10), "length"),  # total not whole f32s
        (_patch(UPD, F + 43, "<I", 1 << 30), "length"),  # absurd total
        (_patch(_patch(UPD, F + 39, "<I", 4), F + 37, "<H", 2), "length"),
    ],
)
def test_malformed_message_is_rejected_with_reason(buf: bytes, reason: str) -> None:
    # Execute / Assert
    assert _reason(buf) == reason


def test_every_truncation_is_short() -> None:
    # Prepare
    samples = [UPD, HB, BYE, MODEL, wire.encode_heartbeat("j", "w", 1, 1, key=b"k")]

    # Execute
    reasons = {_reason(m[:n]) for m in samples for n in range(len(m))}

    # Assert
    assert reasons == {"short"}


def test_oversized_and_non_buffer_input() -> None:
    # Assert
    assert _reason(UPD, max_len=len(UPD) - 1) == "oversize"
    assert _reason(bytes(wire.MAX_MESSAGE + 1)) == "oversize"
    assert _reason("a string") == "buffer"
    assert _reason(None) == "buffer"
    assert _reason(np.zeros((2, 2), dtype="<f4")[:, 0]) == "buffer"


def test_memoryview_and_bytearray_decode_like_bytes() -> None:
    # Execute
    a = wire.decode(memoryview(UPD))
    b = wire.decode(bytearray(UPD))

    # Assert
    assert (a.seq, bytes(a.data)) == (b.seq, bytes(b.data)) == (5, b"\0" * 8)


def test_wire_error_is_a_value_error() -> None:
    # Assert: the host can treat it as any bad-input error
    assert issubclass(wire.WireError, ValueError)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.binary(max_size=120))
def test_fuzz_random_bytes_only_raise_wire_error(buf: bytes) -> None:
    # Execute / Assert
    try:
        wire.decode(buf)
    except wire.WireError as e:
        assert e.reason


@settings(max_examples=600, deadline=None, derandomize=True)
@given(
    st.sampled_from([UPD, HB, BYE, MODEL]),
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=4),
    st.integers(0, 8),
)
def test_fuzz_mutated_messages_only_raise_wire_error(
    base: bytes, edits: list[tuple[int, int]], cut: int
) -> None:
    # Prepare
    buf = bytearray(base)
    for pos, val in edits:
        buf[pos % len(buf)] = val
    data = bytes(buf[: len(buf) - cut])

    # Execute / Assert
    try:
        msg = wire.decode(data)
    except wire.WireError as e:
        assert e.reason
    else:
        assert msg.type in wire.TYPE_NAMES


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(
            st.integers(1, 3),  # seq
            st.integers(0, 3),  # chunk index
            st.integers(1, 4),  # chunk count
            st.integers(1, 3),  # chunk size in f32s
            st.integers(0, 12),  # total in f32s
            st.floats(0, 20),  # now
        ),
        max_size=20,
    )
)
def test_fuzz_reassembler_only_raises_wire_error(
    feeds: list[tuple[int, int, int, int, int, float]],
) -> None:
    # Prepare: chunk headers that decode may accept or not
    r = wire.Reassembler(max_bytes=32, max_age=5, max_pending=2)
    for seq, idx, count, size, total, now in feeds:
        body = b"\0" * min(size * 4, max(0, total * 4 - idx * size * 4))
        head = (2, seq, 1, 0, 0.0, 1, 0.0, 1, idx, count, size * 4, total * 4)
        fmt = "<IIIIfIfBHHII"
        fields = struct.pack(fmt, *head)
        prefix = struct.pack(wire.PREFIX, b"EP", 1, wire.UPDATE, 0, 1, 1, 0, len(body))
        try:
            msg = wire.decode(prefix + b"jw" + fields + body)
            r.add(msg, now)
        except wire.WireError as e:
            assert e.reason

    # Assert: the bounds hold whatever came in
    assert r.pending() <= 2 and r.pending_bytes() <= 2 * 32
