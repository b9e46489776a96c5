"""Ingest: raw MQTT messages become core events; bad input is counted and dropped."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core.types import Push
from edgeps.host.ingest import Bye, Heartbeat, Hello, Ingest
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
    assert (push.worker_id, push.incarnation, push.seq, push.clock) == ("w1", 3, 4, 4)
    assert push.update.dtype == np.float32
    np.testing.assert_array_equal(push.update, np.arange(N, dtype=np.float32) * 0.5)
    assert ingest.dropped == {}


def test_control_messages() -> None:
    ingest = Ingest(job=JOB, n_params=N)
    up = wire.topic_up(JOB, "w2")

    hello = ingest.feed(up, wire.encode_hello(JOB, "w2", 9, "mlp:4-3-2", 512), 0.0)
    beat = ingest.feed(up, wire.encode_heartbeat(JOB, "w2", 9, 12), 0.0)
    bye = ingest.feed(up, wire.encode_bye(JOB, "w2", 9, "lost"), 0.0)

    assert hello == Hello("w2", 9, 512, "mlp:4-3-2")
    assert beat == Heartbeat("w2", 12)
    assert bye == Bye("w2", "last_will")


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
    # Prepare
    key = b"shared-secret"
    ingest = Ingest(job=JOB, n_params=N, hmac_key=key)
    up = wire.topic_up(JOB, "w1")
    forged = bytearray(_update(2, key=b"wrong-key")[0])

    # Execute
    untagged = ingest.feed(up, _update(1)[0], 0.0)
    bad_tag = ingest.feed(up, bytes(forged), 0.0)
    good = ingest.feed(up, _update(3, key=key)[0], 0.0)

    # Assert
    assert untagged is None and bad_tag is None
    assert ingest.dropped == {"hmac": 2}
    assert isinstance(good, Push) and good.seq == 3


def test_stale_partials_expire_and_are_counted() -> None:
    ingest = Ingest(job=JOB, n_params=N, max_age=5.0)
    first = _update(1, max_chunk=256)[0]
    ingest.feed(wire.topic_up(JOB, "w1"), first, 0.0)

    ingest.expire(100.0)

    assert ingest.dropped["expired"] == 1
