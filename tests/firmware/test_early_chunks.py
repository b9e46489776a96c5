"""A message read while the board's client waits for a PUBACK: a chunk of the
worker's own F32 release is written into the parameter buffer at once, not
queued as a copy (the job's final release arrives while the last UPDATE
waits for its acks: queued, its chunks added about 11 KB to a board's peak)."""

from __future__ import annotations

from array import array

from edgeps_worker import mqtt_packets as mp
from edgeps_worker import wire_host as wire
from edgeps_worker.worker import Worker

from tests.firmware.test_mqtt_fake_link import FakeBrokerLink, _client

N = 300  # parameters: 1,200 bytes, three chunks of at most 512


class HeldTrainer:
    """A trainer that only holds parameters (no step is taken here)."""

    model = "linear:299"
    n_params = N

    def __init__(self) -> None:
        self.params = array("f", bytes(4 * N))

    def params_buffer(self) -> array:
        return self.params


def joined_worker() -> Worker:
    w = Worker(None, HeldTrainer(), "j", "w1")
    w.run_id, w.session = 7, 99  # as a WELCOME leaves them
    return w


def release(session: int = 99, version: int = 3) -> list[bytes]:
    body = array("f", [float(i) for i in range(N)]).tobytes()
    return wire.encode_params("j", "w1", 7, session, version, body, 512)


def test_the_client_queues_only_what_the_early_hook_declines() -> None:
    # Prepare: two messages arrive while a QoS 1 publish waits for its PUBACK
    seen: list[tuple[str, bytes]] = []

    def early(topic: str, payload: memoryview) -> bool:
        seen.append((topic, bytes(payload)))
        return payload[0] == ord("a")

    link = FakeBrokerLink()
    c = _client(link, payload_views=early)
    link.inbox += mp.publish_packet("down", b"a-taken", qos=1, pid=7)
    link.inbox += mp.publish_packet("down", b"b-left", qos=1, pid=8)
    # Execute
    c.publish("up", b"grad")
    # Assert: both seen and acked; only the declined one is queued, as a copy
    assert seen == [("down", b"a-taken"), ("down", b"b-left")]
    assert b"\x40\x02\x00\x07" in link.sent and b"\x40\x02\x00\x08" in link.sent
    got = c.poll(0)
    assert got == ("down", b"b-left") and isinstance(got[1], bytes)
    assert c.poll(0) is None


def test_own_release_chunks_land_at_once_and_the_last_waits_its_turn() -> None:
    # Prepare
    w = joined_worker()
    chunks = release()
    assert len(chunks) == 3
    # Execute / Assert: every chunk but the one completing the release is
    # written now; that one is left to the queue, so the worker uses the
    # release in order with what came before it
    assert [w.early(w.down, c) for c in chunks] == [True, True, False]
    assert w.sink.left == 1
    assert w.sink.add(wire.decode(chunks[2])) is True
    assert list(w.trainer.params) == [float(i) for i in range(N)]


def test_what_is_not_its_own_current_release_is_left_to_the_queue() -> None:
    # Prepare
    w = joined_worker()
    stale = release(session=98)[0]  # an earlier session's
    shared = wire.encode_shared_params("j", 7, 3, bytes(4 * N), 512)[0]
    # Execute / Assert: nothing written, the sink untouched
    assert w.early(w.down, stale) is False
    assert w.early(wire.topic_params("j"), shared) is False
    assert w.early(w.down, b"not a message") is False
    assert w.sink.left == 0 and not any(w.trainer.params)
