"""The board's release rules: a shared copy and its RELEASE in either order.

Pure logic (firmware/edgeps_worker/params_sink.py, PROTOCOL.md "Releases"):
arrival orders, QoS 1 redelivery, lost chunks, a wrong or stale copy, and the
F16/I8 decode through a trainer's ``write_params``.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest
from edgeps.kernels import params_codec
from edgeps_worker import wire_host as wire
from edgeps_worker.params_sink import ParamsSink

N = 300  # 1200 bytes of F32: several chunks at max_chunk 256
KEY = b"worker-key"
RUN, SESSION = 7, 99


def shared(version: int, values: np.ndarray, code: int = 1, max_chunk: int = 256):
    body = params_codec.encode(values, code)
    return [wire.decode(c, KEY) for c in wire.encode_shared_params(
        "j", RUN, version, body, max_chunk=max_chunk, dtype=code)]  # fmt: skip


def release(version: int, values: np.ndarray, seq: int = 1, code: int = 1, batch=0):
    digest = params_codec.digest(params_codec.decoded(values, code))
    return wire.decode(wire.encode_release(
        "j", "w", RUN, SESSION, version, digest, seq, batch, KEY), KEY)  # fmt: skip


def own(version: int, values: np.ndarray, seq: int = 0):
    return [wire.decode(c, KEY) for c in wire.encode_params(
        "j", "w", RUN, SESSION, version, values.astype("<f4").tobytes(), 256,
        seq=seq, key=KEY)]  # fmt: skip


class DecodingTrainer:
    """A trainer's receive side: the CPython trainers' decode into float32."""

    reads = (1 << 1) | (1 << 2) | (1 << 3)

    def __init__(self) -> None:
        self.params = np.zeros(N, np.float32)
        self.writes = 0

    def write_params(self, code: int, offset: int, data: Any) -> None:
        params_codec.decode_into(self.params, code, offset, data)
        self.writes += 1


def values(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=N).astype(np.float32)


def test_shared_copy_first_then_its_release():
    # Prepare
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    v = values(1)
    # Execute
    early = [sink.add(m) for m in shared(5, v)]
    done = sink.add(release(5, v, seq=3, batch=16))
    # Assert: the copy is held, the RELEASE uses it
    assert len(early) > 2 and early.count(None) == len(early)
    assert done is True and sink.done == (5, 3, 16)
    np.testing.assert_array_equal(np.asarray(buf), v)


def test_release_first_then_its_shared_copy_out_of_order():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    v = values(2)
    chunks = shared(5, v)
    assert sink.add(release(5, v)) is None  # waits for its copy
    results = [sink.add(m) for m in [chunks[-1], *chunks[:-1]]]
    assert results.count(True) == 1 and results[-1] is True
    np.testing.assert_array_equal(np.asarray(buf), v)


def test_redelivered_release_and_chunks_change_nothing():
    # Prepare: a release used once
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    v = values(3)
    chunks, rel = shared(5, v), release(5, v, seq=2)
    assert [sink.add(m) for m in chunks].count(True) == 0
    assert sink.add(rel) is True
    # Execute: QoS 1 redelivers the RELEASE and every chunk
    again = [sink.add(rel)] + [sink.add(m) for m in chunks]
    # Assert: no second release, the buffer still holds the vector used
    assert again == [None] * len(again)
    np.testing.assert_array_equal(np.asarray(buf), v)


def test_after_a_hello_the_same_release_may_be_used_again():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    v = values(4)
    msgs = own(5, v, seq=2)
    assert [sink.add(m) for m in msgs][-1] is True
    assert [sink.add(m) for m in msgs] == [None] * len(msgs)  # redelivery
    sink.reset()  # the worker said HELLO: the PS resends the release
    assert [sink.add(m) for m in msgs][-1] is True


def test_a_lost_shared_chunk_never_releases():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    v = values(5)
    chunks = shared(5, v)
    results = [sink.add(release(5, v))] + [sink.add(m) for m in chunks[1:]]
    # Assert: nothing used; the worker's release timeout will ask again
    assert True not in results and sink.pending is not None


def test_a_copy_that_does_not_match_the_digest_is_refused():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    forged, real = values(6), values(7)
    assert [sink.add(m) for m in shared(5, forged)].count(None) > 0
    assert sink.add(release(5, real)) == "release_digest"
    assert sink.add(release(5, real)) is None  # waits again, nothing used


def test_a_newer_copy_over_the_one_a_release_waits_for_is_stale():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    old, new = values(8), values(9)
    assert sink.add(release(5, old)) is None
    results = [sink.add(m) for m in shared(6, new)]
    assert results[-1] == "release_stale" and True not in results
    # and a RELEASE naming a version older than the held copy is stale too
    assert sink.add(release(5, old, seq=4)) == "release_stale"


def test_own_release_goes_first_and_a_release_abandons_a_lost_one():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    mine, theirs = values(10), values(11)
    first = own(5, mine)
    assert sink.add(first[0]) is None
    # a shared chunk does not abandon the worker's own unfinished release
    other = shared(6, theirs)
    assert [sink.add(m) for m in other] == [None] * len(other)
    assert [sink.add(m) for m in first[1:]][-1] is True
    np.testing.assert_array_equal(np.asarray(buf), mine)
    # a RELEASE does abandon one whose chunks were lost
    assert sink.add(own(7, mine, seq=1)[0]) is None
    assert sink.add(release(8, theirs, seq=2)) is None
    assert [sink.add(m) for m in shared(8, theirs)][-1] is True
    np.testing.assert_array_equal(np.asarray(buf), theirs)


@pytest.mark.parametrize("code", [wire.DTYPE_F16, wire.DTYPE_I8])
def test_compressed_shared_copy_is_decoded_by_the_trainer(code: int):
    # Prepare
    trainer = DecodingTrainer()
    sink = ParamsSink(trainer.params, 4 * N, trainer)
    v = values(12) * 3
    # Execute: record-aligned chunks (I8: 132-byte blocks) in reverse order
    chunks = shared(5, v, code, max_chunk=12 + 1 + 39 + 264)
    results = [sink.add(release(5, v, code=code))]
    results += [sink.add(m) for m in reversed(chunks)]
    # Assert: the worker holds exactly the decoded vector the RELEASE names
    assert results[-1] is True and trainer.writes == len(chunks) > 1
    np.testing.assert_array_equal(trainer.params, params_codec.decoded(v, code))
    assert np.abs(trainer.params - v).max() < (0.01 if code == 2 else 0.05)


def test_codes_a_trainer_cannot_read_and_bad_lengths_are_refused():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)  # no write_params: F32 only
    v = values(13)
    assert sink.add(shared(5, v, wire.DTYPE_F16)[0]) == "params_dtype"
    trainer = DecodingTrainer()
    sink = ParamsSink(trainer.params, 4 * N, trainer)
    short = shared(5, v[: N - 1], wire.DTYPE_I8)[0]
    assert sink.add(short) == "params_length"
    assert sink.reads == 0b1110


def test_a_chunk_with_a_nan_scale_writes_nothing_and_is_refused():
    trainer = DecodingTrainer()
    sink = ParamsSink(trainer.params, 4 * N, trainer)
    v = values(14)
    body = bytearray(params_codec.encode(v, wire.DTYPE_I8))
    body[0:4] = np.array([np.nan], "<f4").tobytes()  # the first block's scale
    (msg,) = [wire.decode(c) for c in wire.encode_shared_params(
        "j", RUN, 5, bytes(body), max_chunk=4096, dtype=wire.DTYPE_I8)]  # fmt: skip
    assert sink.add(msg) == "params_value"
    assert not trainer.params.any() and trainer.writes == 0


def test_a_replayed_older_copy_never_replaces_a_newer_one():
    # Prepare: the copy of round 5 is held; a copy of round 3 was captured earlier
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    old, cur = values(20), values(21)
    assert [sink.add(m) for m in shared(5, cur)].count(True) == 0
    # Execute: the old copy is replayed, whole and interleaved, before the RELEASE
    replayed = [sink.add(m) for m in shared(3, old)]
    done = sink.add(release(5, cur, seq=2))
    # Assert
    assert replayed == [None] * len(replayed), "HELD: a replayed older copy was used"
    assert done is True, "HELD: the RELEASE waited for a copy it already held"
    np.testing.assert_array_equal(np.asarray(buf), cur)


def test_older_chunks_interleaved_with_the_copy_do_not_break_it():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    old, cur = values(22), values(23)
    real, stale = shared(6, cur), shared(4, old)
    assert [sink.add(m) for m in real[:1]] == [None]
    mixed = []
    for a, b in zip(real[1:], stale, strict=False):
        mixed += [sink.add(b), sink.add(a)]
    assert sink.add(release(6, cur)) is True, "HELD: interleaved replays broke the copy"
    assert True not in mixed


def test_a_release_whose_copy_came_and_went_asks_at_once():
    # Prepare: a stray chunk of an own release is filling when the copy passes
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    mine, cur = values(24), values(25)
    assert sink.add(own(2, mine, seq=1)[0]) is None
    assert [sink.add(m) for m in shared(5, cur)].count(None) > 0  # skipped
    # Execute / Assert: its RELEASE cannot be served by anything still to come
    assert sink.add(release(5, cur, seq=2)) == "release_stale", (
        "HELD: the worker would wait its release timeout for a copy that passed"
    )


def test_a_release_older_than_the_one_used_is_a_replay():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    cur = values(26)
    assert [sink.add(m) for m in own(7, cur, seq=3)][-1] is True
    assert sink.add(release(5, cur, seq=2)) is None, "HELD: an old RELEASE was heard"
    assert sink.pending is None


def test_a_refused_release_redelivered_asks_nothing_more():
    buf = array("f", bytes(4 * N))
    sink = ParamsSink(buf, 4 * N)
    forged, real = values(27), values(28)
    [sink.add(m) for m in shared(5, forged)]
    rel = release(5, real)
    assert sink.add(rel) == "release_digest"
    assert sink.add(rel) is None, "HELD: one RELEASE asked for two resends"
