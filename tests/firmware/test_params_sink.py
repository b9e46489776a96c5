"""ParamsSink: PARAMS chunks land in place, in any order, once per version."""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from edgeps_worker import wire_host as wire
from edgeps_worker.params_sink import ParamsSink

N = 100  # floats; 400 bytes in 64-byte chunks -> 7 chunks, the last one short


def chunks(version: int, values: np.ndarray, max_chunk: int = 128):
    return [wire.decode(c) for c in wire.encode_params("j", "w", 1, 2, version,
            values.astype("<f4").tobytes(), max_chunk)]  # fmt: skip


def test_chunks_in_reverse_order_with_a_redelivery_fill_the_buffer():
    # Prepare
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    want = np.arange(N, dtype=np.float32) / 7
    msgs = chunks(3, want)
    # Execute: chunk 0 twice (a QoS 1 redelivery), then the rest backwards
    order = [msgs[0], msgs[0], *msgs[:0:-1]]
    results = [sink.add(m, wire.DTYPE_F32) for m in order]
    # Assert: completes exactly once, when the last missing chunk arrives
    assert len(msgs) > 2
    assert results.count(True) == 1 and results[-1] is True
    np.testing.assert_array_equal(np.asarray(buf), want)


def test_a_newer_version_abandons_an_unfinished_one():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    old, new = chunks(1, np.ones(N)), chunks(2, np.full(N, 2.0))
    assert sink.add(old[0], wire.DTYPE_F32) is None
    results = [sink.add(m, wire.DTYPE_F32) for m in new]
    assert results[-1] is True
    assert np.all(np.asarray(buf) == 2.0)


def test_chunks_that_cannot_fit_are_refused_with_a_reason():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    short = chunks(1, np.ones(N - 1))[0]
    assert sink.add(short, wire.DTYPE_F32) == "params_length"
    assert sink.add(chunks(1, np.ones(N))[0], 99) == "params_dtype"
    assert np.all(np.asarray(buf) == 0.0)


def test_params_land_in_a_preallocated_buffer() -> None:
    # Prepare: a board's buffer may be any writable buffer, here a bytearray
    p = np.linspace(-1, 1, 200, dtype="<f4")
    msgs = [wire.decode(c) for c in wire.encode_params(
        "j", "w", 1, 2, 9, p, max_chunk=200, seq=3)]  # fmt: skip
    target = bytearray(800)
    sink = ParamsSink(target, 800)

    # Execute
    out = [sink.add(m, wire.DTYPE_F32) for m in reversed(msgs)]

    # Assert
    assert out[-1] is True and out.count(True) == 1 and msgs[0].version == 9
    np.testing.assert_array_equal(np.frombuffer(target, "<f4"), p)
    assert sink.version == -1  # nothing left half received


def test_preallocated_buffer_of_wrong_size_is_rejected() -> None:
    # Prepare
    (chunk,) = wire.encode_params("j", "w", 1, 2, 9, b"\0" * 16)
    # Execute / Assert: a sink refuses a buffer that is not n_params long, and a
    # sink of another size refuses the chunk
    with pytest.raises(ValueError, match="n_params"):
        ParamsSink(bytearray(12), 16)
    assert ParamsSink(bytearray(12), 12).add(wire.decode(chunk), 1) == "params_length"


def test_two_releases_of_one_version_are_told_apart_by_seq() -> None:
    # Prepare: the release of version 5 answering UPDATE 1 loses its last
    # chunk; the one answering UPDATE 2 at the same version comes whole;
    # other values in the second make a buffer mixed from both visible
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    first = [wire.decode(c) for c in wire.encode_params(
        "j", "w", 1, 2, 5, np.ones(N, "<f4"), 128, seq=1)]  # fmt: skip
    second = [wire.decode(c) for c in wire.encode_params(
        "j", "w", 1, 2, 5, np.full(N, 2.0, "<f4"), 128, seq=2)]  # fmt: skip
    # Execute
    early = [sink.add(m, wire.DTYPE_F32) for m in first[:-1]]
    late = [sink.add(m, wire.DTYPE_F32) for m in second]
    # Assert: the second release is taken whole, not merged with the first
    assert early.count(True) == 0 and late[-1] is True and late.count(True) == 1
    assert np.all(np.asarray(buf) == 2.0)
