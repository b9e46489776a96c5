"""Ingest: raw MQTT messages become core events; bad input is counted and dropped."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core.types import Heartbeat, Join, Leave, Push, Rejected
from edgeps.runtime.ingest import Ingest
from edgeps.runtime.peers import Peers
from edgeps.security.keys import derive_worker_key
from edgeps_worker import wire_host as wire

JOB = "j1"
N = 300


def _update(seq: int, *, wid: str = "w1", max_chunk: int = 4096, key=None) -> list:
    grad = np.arange(N, dtype="<f4") * 0.5
    return wire.encode_update(
        JOB,
        wid,
        3,
        seq,
        seq,
        0,
        0.01,
        16,
        0.7,
        grad.tobytes(),
        max_chunk=max_chunk,
        key=key,
    )


def test_chunked_update_becomes_one_push() -> None:
    # Prepare
    ingest = Ingest(job=JOB, n_params=N)
    chunks = _update(4, max_chunk=256)
    assert len(chunks) > 3

    # Execute
    events = [ingest.feed(wire.topic_up(JOB, "w1"), c, 1.0) for c in chunks]

    # Assert
    assert events[:-1] == [None] * (len(chunks) - 1)
    push = events[-1]
    assert isinstance(push, Push)
    assert (push.worker_id, push.session, push.seq, push.clock) == ("w1", 3, 4, 4)
    assert push.update.dtype == np.float32
    np.testing.assert_array_equal(push.update, np.arange(N, dtype=np.float32) * 0.5)
    assert ingest.dropped == {}


def test_control_messages() -> None:
    ingest = Ingest(job=JOB, n_params=N, model="mlp:4-3-2")
    up = wire.topic_up(JOB, "w2")

    hello = ingest.feed(
        up, wire.encode_hello(JOB, "w2", 9, 77, "mlp:4-3-2", 512, max_batch=8), 0.0
    )
    beat = ingest.feed(up, wire.encode_heartbeat(JOB, "w2", 9, 12), 0.0)
    bye = ingest.feed(up, wire.encode_bye(JOB, "w2", 9, "lost"), 0.0)

    # the HELLO's model was checked here; its chunk size went to the worker's peer
    assert isinstance(hello, Join) and ingest.peers.get("w2").max_chunk == 512
    assert (hello.worker_id, hello.instance, hello.nonce, hello.max_batch) == (
        "w2",
        9,
        77,
        8,
    )
    assert hello.session != 0  # a fresh one, drawn at random
    assert beat == Heartbeat("w2", 12, session=9)
    assert bye == Leave("w2", "last_will", nonce=9)


def test_hello_for_another_model_is_refused_at_ingest() -> None:
    # Prepare
    ingest = Ingest(job=JOB, n_params=N, model="mlp:4-3-2")
    up = wire.topic_up(JOB, "w2")

    # Execute: another model, then our model spelled another way
    other = ingest.feed(up, wire.encode_hello(JOB, "w2", 1, 1, "mlp:4-5-2"), 0.0)
    spelled = ingest.feed(
        up, wire.encode_hello(JOB, "w2", 1, 1, " mlp:4-3-2:relu"), 0.0
    )

    # Assert
    assert other == Rejected("w2", 0, "model_mismatch")
    assert ingest.dropped == {"model_mismatch": 1}
    assert (
        isinstance(spelled, Join)
        and (spelled.worker_id, spelled.instance) == ("w2", 1)
        and ingest.peers.get("w2").model_ok == " mlp:4-3-2:relu"
    )


@pytest.mark.parametrize(
    ("topic", "payload", "reason"),
    [
        ("edgeps/j1/up/w1", b"", "short"),
        ("edgeps/j1/up/w1", b"\x00" * 64, "magic"),
        ("edgeps/j1/up/w1", b"EP\x09" + b"\x00" * 40, "version"),
        ("edgeps/other/up/w1", _update(1)[0], "job"),
        ("edgeps/j1/up/w9", _update(1)[0], "id_mismatch"),
        ("not/a/topic", _update(1)[0], "topic"),
        ("edgeps/j1/up/w1", _update(1)[0][:-5], "short"),
        ("edgeps/j1/up/w1", bytes(4 * N + 8192), "oversized"),
    ],
)
def test_bad_messages_are_counted_by_reason(
    topic: str, payload: bytes, reason: str
) -> None:
    ingest = Ingest(job=JOB, n_params=N)

    event = ingest.feed(topic, payload, 0.0)

    assert event is None
    assert ingest.dropped == {reason: 1}


def test_update_larger_than_the_model_is_refused() -> None:
    ingest = Ingest(job=JOB, n_params=N // 2)

    event = ingest.feed(wire.topic_up(JOB, "w1"), _update(1)[0], 0.0)

    assert event is None
    assert sum(ingest.dropped.values()) == 1


def test_hmac_key_requires_a_valid_tag() -> None:
    # Prepare: each worker is checked with its own key, derived from the master
    master = b"shared-secret"
    ingest = Ingest(job=JOB, n_params=N, peers=Peers(JOB, master_key=master))
    up = wire.topic_up(JOB, "w1")
    forged = bytearray(_update(2, key=b"wrong-key")[0])
    other_workers = _update(4, key=derive_worker_key(master, "w2"))[0]

    # Execute
    untagged = ingest.feed(up, _update(1)[0], 0.0)
    bad_tag = ingest.feed(up, bytes(forged), 0.0)
    as_master = ingest.feed(up, _update(5, key=master)[0], 0.0)
    as_other = ingest.feed(up, other_workers, 0.0)
    good = ingest.feed(up, _update(3, key=derive_worker_key(master, "w1"))[0], 0.0)

    # Assert
    assert untagged is None and bad_tag is None
    assert as_master is None and as_other is None
    assert ingest.dropped == {"hmac": 4}
    assert isinstance(good, Push) and good.seq == 3


def test_hello_of_an_earlier_link_is_a_replay() -> None:
    # Prepare: the worker's first link opened a session, then it reconnected
    ingest = Ingest(job=JOB, n_params=N)
    up = wire.topic_up(JOB, "w1")
    first = wire.encode_hello(JOB, "w1", 5, 100)
    join = ingest.feed(up, first, 0.0)
    assert isinstance(join, Join)
    peer = ingest.peers.get("w1")
    peer.open_session(join.session, join.nonce)
    again = ingest.feed(up, first, 0.5)  # the same link asks again
    second = ingest.feed(up, wire.encode_hello(JOB, "w1", 5, 101), 1.0)
    assert isinstance(second, Join)
    peer.open_session(second.session, second.nonce)

    # Execute
    replayed = ingest.feed(up, first, 2.0)

    # Assert: the same link keeps its session; a new one gets a fresh one
    assert isinstance(again, Join) and again.session == join.session
    assert second.session != join.session
    assert replayed is None and ingest.dropped == {"replay": 1}


def test_stale_partials_expire_and_are_counted() -> None:
    ingest = Ingest(job=JOB, n_params=N, max_age=5.0)
    first = _update(1, max_chunk=256)[0]
    ingest.feed(wire.topic_up(JOB, "w1"), first, 0.0)

    ingest.expire(100.0)

    assert ingest.dropped["expired"] == 1


def test_peers_past_the_limit_are_served_but_not_kept() -> None:
    # Prepare
    peers = Peers(JOB, max_chunk=512, max_peers=2)
    topics = {w: wire.topic_up(JOB, w) for w in ("a", "b", "c")}

    # Execute
    got = {w: peers.get(w, t) for w, t in topics.items()}

    # Assert: every id gets its down topic and the default chunk size; only two
    # are remembered, so made-up ids cannot grow the table without bound
    assert {w: (p.down_topic, p.max_chunk) for w, p in got.items()} == {
        w: (wire.topic_down(JOB, w), 512) for w in topics
    }
    assert len(peers) == 2
    assert peers.of_topic(topics["a"]) is got["a"]
    assert peers.of_topic(topics["c"]) is None
