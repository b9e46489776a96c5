"""ParamsSink: PARAMS chunks land in place, in any order, once per version."""

from __future__ import annotations

from array import array

import numpy as np
from edgeps_worker import wire
from edgeps_worker.params_sink import ParamsSink

N = 100  # floats; 400 bytes in 64-byte chunks -> 7 chunks, the last one short


def chunks(version: int, values: np.ndarray, max_chunk: int = 128):
    return [wire.decode(c) for c in wire.encode_params("j", "w", version,
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
