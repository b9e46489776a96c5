"""Chunk reassembly: order, duplicates, gaps, age and memory bounds."""

from __future__ import annotations

import random

import numpy as np
import pytest
from edgeps_worker import wire_host as wire


def _chunks(n: int = 300, seq: int = 1, max_chunk: int = 256) -> list[bytes]:
    g = np.arange(n, dtype="<f4")
    return wire.encode_update(
        "j", "w", 1, seq, seq, 0, 0.1, 8, 0.5, g, max_chunk=max_chunk
    )


def test_out_of_order_chunks_with_duplicates_reassemble_once() -> None:
    # Prepare
    chunks = _chunks()
    order = chunks + chunks[:3]
    random.Random(4).shuffle(order)
    r = wire.Reassembler(max_bytes=4096, max_age=10, max_pending=2)

    # Execute
    done = [m for m in (r.add(wire.decode(c), 0.0) for c in order) if m is not None]

    # Assert: completes once; late duplicates start no partial that never ends
    assert len(done) == 1
    np.testing.assert_array_equal(
        np.frombuffer(done[0].data, "<f4"), np.arange(300, dtype="<f4")
    )
    assert r.duplicates == 3 and r.pending() == 0


def test_duplicate_chunk_before_completion_is_counted_not_applied() -> None:
    # Prepare
    chunks = _chunks()
    r = wire.Reassembler(max_bytes=4096, max_age=10, max_pending=2)

    # Execute
    first = r.add(wire.decode(chunks[0]), 0.0)
    again = r.add(wire.decode(chunks[0]), 0.0)

    # Assert
    assert first is None and again is None
    assert r.duplicates == 1 and r.pending() == 1


def test_missing_chunk_never_completes_and_expires() -> None:
    # Prepare
    chunks = _chunks()
    r = wire.Reassembler(max_bytes=4096, max_age=2.0, max_pending=4)

    # Execute
    results = [r.add(wire.decode(c), 1.0) for c in chunks[:-1]]
    held = r.pending()
    dropped = r.expire(3.5)

    # Assert
    assert results == [None] * (len(chunks) - 1)
    assert held == 1 and dropped == 1 and r.pending() == 0 and r.expired == 1


def test_late_chunk_after_expiry_starts_fresh_and_does_not_complete() -> None:
    # Prepare
    chunks = _chunks()
    r = wire.Reassembler(max_bytes=4096, max_age=1.0, max_pending=4)
    for c in chunks[:-1]:
        r.add(wire.decode(c), 0.0)

    # Execute
    late = r.add(wire.decode(chunks[-1]), 5.0)

    # Assert
    assert late is None and r.pending() == 1 and r.expired == 1


def test_memory_bound_evicts_oldest_partial() -> None:
    # Prepare
    r = wire.Reassembler(max_bytes=4096, max_age=100, max_pending=2)

    # Execute
    for seq in (1, 2, 3):
        r.add(wire.decode(_chunks(seq=seq)[0]), float(seq))

    # Assert
    assert r.pending() == 2 and r.evicted == 1
    assert r.pending_bytes() == 2 * 300 * 4


def test_message_larger_than_max_bytes_is_rejected() -> None:
    # Prepare
    r = wire.Reassembler(max_bytes=1000, max_age=10, max_pending=2)

    # Execute / Assert
    with pytest.raises(wire.WireError) as e:
        r.add(wire.decode(_chunks()[0]), 0.0)
    assert e.value.reason == "size" and r.pending() == 0


def test_chunks_that_disagree_drop_the_partial() -> None:
    # Prepare: same (wid, incarnation, seq), different clock
    a = wire.encode_update(
        "j", "w", 1, 5, 5, 0, 0.1, 8, 0.5, b"\0" * 400, max_chunk=256
    )
    b = wire.encode_update(
        "j", "w", 1, 5, 6, 0, 0.1, 8, 0.5, b"\0" * 400, max_chunk=256
    )
    r = wire.Reassembler(max_bytes=4096, max_age=10, max_pending=2)
    r.add(wire.decode(a[0]), 0.0)

    # Execute / Assert
    with pytest.raises(wire.WireError) as e:
        r.add(wire.decode(b[1]), 0.0)
    assert e.value.reason == "chunk" and r.pending() == 0


def test_unchunked_and_non_payload_messages_pass_straight_through() -> None:
    # Prepare
    r = wire.Reassembler(max_bytes=64, max_age=10, max_pending=1)
    hb = wire.decode(wire.encode_heartbeat("j", "w", 1, 1))
    (one,) = wire.encode_params("j", "w", 1, 2, 1, b"\0" * 8)

    # Execute / Assert
    assert r.add(hb, 0.0) is hb
    assert r.add(wire.decode(one), 0.0) is not None
    assert r.pending() == 0
