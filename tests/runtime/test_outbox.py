"""Outbox grouping: one shared PARAMS per multi-worker release, a RELEASE each.

Pure logic with a recording publisher; the bytes it records are decoded by
the real wire module and fed to the board's ParamsSink, so what each worker
ends up holding is checked, per downlink code.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import Counter
from typing import Any

import numpy as np
import pytest
from edgeps.core.types import Rejected, Release
from edgeps.kernels import params_codec
from edgeps.runtime.outbox import Outbox
from edgeps.runtime.peers import Peers
from edgeps.security.keys import derive_worker_key
from edgeps_worker import wire_host as wire
from edgeps_worker.params_sink import ParamsSink

MASTER = b"m" * 32
N = 1000


class RecordingLink:
    """Keeps every publish in order, as the broker would receive it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def publish(self, topic: str, payload: Any, qos: int = 1, retain: bool = False):
        self.sent.append((topic, bytes(payload)))


def make_outbox(code: int = 1, shared: bool = True) -> tuple[Outbox, RecordingLink]:
    link = RecordingLink()
    peers = Peers("j", max_chunk=1024, master_key=MASTER)
    for i, wid in enumerate(("a", "b", "c")):
        peers.get(wid).open_session(100 + i, 1)
    box = Outbox(link, peers, model="m", run=5, params_code=code, shared=shared)
    return box, link


def params() -> np.ndarray:
    p = np.random.default_rng(0).normal(size=N).astype(np.float32)
    p.flags.writeable = False
    return p


def receive(link: RecordingLink, wid: str) -> tuple[Any, np.ndarray]:
    """What worker ``wid`` sees (its down topic and the shared one), in order."""
    key = derive_worker_key(MASTER, wid)

    class Trainer:
        reads = 0b1110
        buf = np.zeros(N, np.float32)

        def write_params(self, code: int, offset: int, data: Any) -> None:
            params_codec.decode_into(self.buf, code, offset, data)

    t = Trainer()
    sink = ParamsSink(t.buf, 4 * N, t)
    results = []
    for topic, payload in link.sent:
        if topic in (wire.topic_down("j", wid), wire.topic_params("j")):
            results.append(sink.add(wire.decode(payload, key)))
    return results, t.buf


@pytest.mark.parametrize("code", [1, 2, 3])
def test_a_round_publishes_the_parameters_once(code: int):
    # Prepare
    box, link = make_outbox(code)
    p = params()
    # Execute: a BSP round releasing three workers at version 4
    box.release(Release(("a", "b", "c"), 4, p, answers=(1, 2, 3)))
    # Assert: one copy on the shared topic, one small signed RELEASE each
    topics = Counter(t for t, _ in link.sent)
    shared = [wire.decode(b) for t, b in link.sent if t == wire.topic_params("j")]
    assert sum(len(m.data) for m in shared) == params_codec.encoded_len(code, N)
    assert {m.chunk_index for m in shared} == set(range(shared[0].chunk_count))
    assert all(m.chunk_size % params_codec.RECORD[code] == 0 for m in shared)
    assert topics[wire.topic_down("j", "a")] == 1 and len(topics) == 4
    assert box.shared_rounds == 1 and box.releases_sent == 3
    assert box.params_bytes == sum(len(b) for t, b in link.sent if "params" in t)
    want = params_codec.decoded(p, code)
    for wid, seq in (("a", 1), ("b", 2), ("c", 3)):
        results, held = receive(link, wid)
        assert results.count(True) == 1 and results[-1] is True
        np.testing.assert_array_equal(held, want)
        (rel,) = [wire.decode(b) for t, b in link.sent if t.endswith("/down/" + wid)]
        assert (rel.type, rel.seq, rel.version) == (wire.RELEASE, seq, 4)
    digest = wire.decode(link.sent[-1][1]).digest
    assert digest == hashlib.sha256(want.astype("<f4").tobytes()).digest()[:16]


def test_a_single_worker_release_stays_on_its_down_topic():
    box, link = make_outbox()
    p = params()
    box.release(Release(("b",), 2, p, answers=(None,)))
    assert {t for t, _ in link.sent} == {wire.topic_down("j", "b")}
    msgs = [wire.decode(b, derive_worker_key(MASTER, "b")) for _, b in link.sent]
    assert all(m.type == wire.PARAMS and m.session == 101 for m in msgs)
    assert box.shared_rounds == 0 and box.rounds == 1


def test_without_shared_releases_each_worker_gets_a_full_copy():
    box, link = make_outbox(shared=False)
    box.release(Release(("a", "b", "c"), 4, params(), answers=(1, 2, 3)))
    assert not [t for t, _ in link.sent if t == wire.topic_params("j")]
    assert box.params_bytes > 3 * 4 * N  # three full vectors plus headers
    for wid in ("a", "b", "c"):
        results, held = receive(link, wid)
        assert results[-1] is True
        np.testing.assert_array_equal(held, params())


def test_the_shared_copy_fits_the_smallest_worker_chunk():
    box, link = make_outbox(code=3)
    box.peers.get("b").max_chunk = 400
    box.release(Release(("a", "b", "c"), 4, params(), answers=(1, 2, 3)))
    shared = [b for t, b in link.sent if t == wire.topic_params("j")]
    assert max(len(b) for b in shared) <= 400
    results, held = receive(link, "b")
    assert results[-1] is True


def test_the_shared_copy_fits_a_worker_the_round_does_not_release():
    # Prepare: a and b read 4 KB messages; c, a board, reads 400 B and is not
    # in the round, but it receives the shared topic all the same
    box, link = make_outbox()
    for wid, chunk in (("a", 4096), ("b", 4096), ("c", 400)):
        box.peers.announce(box.peers.get(wid), chunk)
    # Execute
    box.release(Release(("a", "b"), 4, params(), answers=(1, 2)))
    # Assert: every shared chunk fits c's buffer; once c is gone they grow again
    shared = [b for t, b in link.sent if t == wire.topic_params("j")]
    assert max(len(b) for b in shared) <= 400
    box.peers.forget("c")
    link.sent.clear()
    box.release(Release(("a", "b"), 5, params(), answers=(3, 4)))
    shared = [b for t, b in link.sent if t == wire.topic_params("j")]
    assert len(shared) == 1 and len(shared[0]) > 4 * N


def test_an_unsigned_shared_copy_is_refused_by_a_board_without_write_params():
    # a board trainer that reads only F32 refuses an I8 copy, it is not misread
    box, link = make_outbox(code=3)
    box.release(Release(("a", "b"), 4, params(), answers=(1, 2)))
    sink = ParamsSink(array("f", bytes(4 * N)), 4 * N)
    key = derive_worker_key(MASTER, "a")
    out = [sink.add(wire.decode(b, key)) for t, b in link.sent if "down/b" not in t]
    assert "params_dtype" in out and True not in out


def test_bytes_per_round_with_and_without_the_shared_copy():
    # Prepare: the same round of three workers, both ways
    rounds = {}
    for shared in (False, True):
        box, _ = make_outbox(shared=shared)
        box.release(Release(("a",), 3, params(), answers=(None,)))  # a join
        box.release(Release(("a", "b", "c"), 4, params(), answers=(1, 2, 3)))
        rounds[shared] = box.stats()
    # Assert: only the round of several workers is counted as one
    assert rounds[True]["multi_rounds"] == rounds[False]["multi_rounds"] == 1
    full = rounds[False]["bytes_per_multi_round"]
    one = rounds[True]["bytes_per_multi_round"]
    assert 4 * N < one < 1.15 * 4 * N and full > 3 * 4 * N


def test_a_hello_that_cannot_read_the_jobs_params_code_is_refused():
    # Prepare: a job releasing in I8
    from edgeps.runtime.ingest import Ingest

    ingest = Ingest(job="j", n_params=N, params_code=wire.DTYPE_I8)
    up = wire.topic_up("j", "w1")
    # Execute: an F32-only HELLO (the encoder's default), then one reading I8
    refused = ingest.feed(up, wire.encode_hello("j", "w1", 9, 77), 0.0)
    taken = ingest.feed(up, wire.encode_hello("j", "w1", 9, 78, dtypes=(1, 3)), 0.0)
    # Assert: refused with the reason that becomes STOP codec
    assert refused == Rejected("w1", 0, "codec_mismatch")
    assert type(taken).__name__ == "Join"
    assert ingest.dropped["codec_mismatch"] == 1


def test_the_final_release_is_f32_signed_and_bounded() -> None:
    # Prepare: an int8 downlink, three workers with sessions
    box, link = make_outbox(code=3)
    p = params()
    peers = [box.peers.get(wid) for wid in ("a", "b", "c")]
    # Execute: a budget that two releases exhaust
    sent = box.final(peers, 9, p, budget=8 * N)
    # Assert: a and b hold the exact parameters (signed, their own), c nothing
    assert sent == 2
    for wid in ("a", "b"):
        results, buf = receive(link, wid)
        assert results[-1] is True and np.array_equal(buf, p)
    assert receive(link, "c")[0] == []
    assert {t for t, _ in link.sent} == {
        wire.topic_down("j", "a"),
        wire.topic_down("j", "b"),
    }
