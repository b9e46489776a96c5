"""A PUBLISH longer than max_packet is read off the link and dropped, the
session kept: poll hands on its topic with payload None."""

from __future__ import annotations

import pytest
from edgeps_worker import mqtt_packets as mp

from tests.firmware.test_mqtt_fake_link import FakeBrokerLink, _client


def test_oversized_publish_is_acked_drained_and_the_next_message_arrives() -> None:
    # Prepare: 5,000 bytes against a 256-byte buffer, 100 bytes per read
    link = FakeBrokerLink(chunk=100)
    c = _client(link, max_packet=256)
    link.inbox += mp.publish_packet("down", bytes(5000), qos=1, pid=41)
    link.inbox += mp.publish_packet("down", b"after", qos=1, pid=42)

    # Execute
    first, second = c.poll(1000), c.poll(1000)

    # Assert
    assert first == ("down", None) and second == ("down", b"after")
    assert mp.puback_packet(41) in link.packets and c.connected
    assert link.packets[-1] == mp.puback_packet(42) and not link.closed


def test_oversized_qos0_publish_during_a_puback_wait_is_queued_as_topic_only() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link, max_packet=256)
    link.inbox += mp.publish_packet("down", b"\xff" * 1000, qos=0)
    link.inbox += mp.publish_packet("down", b"x", qos=0)

    # Execute
    c.publish("up", b"grad")
    got = [c.poll(0), c.poll(0)]

    # Assert
    assert got == [("down", None), ("down", b"x")] and c.connected


def test_draining_survives_a_poll_that_times_out_halfway() -> None:
    # Prepare: only the first 600 of 2,009 bytes have arrived
    link = FakeBrokerLink()
    c = _client(link, max_packet=256)
    pkt = mp.publish_packet("down", bytes(range(250)) * 8, qos=1, pid=5)
    link.inbox += pkt[:600]

    # Execute
    first = c.poll(0)
    none = c.poll(0)  # nothing more came yet: the drain waits, no garbage parsed
    link.inbox += pkt[600:] + mp.publish_packet("down", b"next", qos=1, pid=6)
    last = c.poll(0)

    # Assert
    assert first == ("down", None) and none is None and last == ("down", b"next")
    assert c.connected and c.violations == 0


def test_a_head_split_across_reads_is_read_again_whole() -> None:
    # Prepare: the fixed header and half the topic, then a poll times out
    link = FakeBrokerLink()
    c = _client(link, max_packet=256)
    pkt = mp.publish_packet("edgeps/j/down/w", bytes(3000), qos=1, pid=9)
    link.inbox += pkt[:8]

    # Execute
    none = c.poll(0)
    link.inbox += pkt[8:] + mp.publish_packet("edgeps/j/down/w", b"ok", qos=1, pid=10)
    got = [c.poll(0), c.poll(0)]

    # Assert
    assert none is None
    assert got == [("edgeps/j/down/w", None), ("edgeps/j/down/w", b"ok")]
    assert mp.puback_packet(9) in link.packets and c.connected


def test_a_topic_longer_than_max_packet_still_drops_the_link() -> None:
    # Prepare: no broker forwards it to a board that subscribed to short topics
    link = FakeBrokerLink()
    c = _client(link, max_packet=256)
    link.inbox += mp.publish_packet("t" * 300, b"x", qos=0)

    # Execute / Assert
    with pytest.raises(OSError):
        c.poll(100)
    assert not c.connected


def test_an_oversized_publish_within_keep_over_arrives_whole() -> None:
    # Prepare: a 1,600-byte card against a 256-byte buffer, 100 bytes per
    # read; then one past keep_over, then a small one
    link = FakeBrokerLink(chunk=100)
    c = _client(link, max_packet=256)
    c.keep_over = 2000
    card = bytes(range(200)) * 8
    link.inbox += mp.publish_packet("down", card, qos=1, pid=7)
    link.inbox += mp.publish_packet("down", bytes(2001), qos=1, pid=8)
    link.inbox += mp.publish_packet("down", b"after", qos=1, pid=9)

    # Execute
    got = [c.poll(1000), c.poll(1000), c.poll(1000)]

    # Assert
    assert got[0] == ("down", card)
    assert got[1:] == [("down", None), ("down", b"after")]
    assert mp.puback_packet(7) in link.packets and mp.puback_packet(8) in link.packets
    assert c.connected and c.violations == 0


def test_a_kept_publish_cut_off_at_the_deadline_is_dropped_and_drained() -> None:
    # Prepare: only the first 600 of about 1,600 bytes arrive in time
    link = FakeBrokerLink()
    c = _client(link, max_packet=256, timeout_ms=50)
    c.keep_over = 2000
    pkt = mp.publish_packet("down", bytes(1600), qos=1, pid=5)
    link.inbox += pkt[:600]

    # Execute
    first = c.poll(0)
    link.inbox += pkt[600:] + mp.publish_packet("down", b"next", qos=1, pid=6)
    last = c.poll(0)

    # Assert: the rest was discarded, never parsed as packets
    assert first == ("down", None) and last == ("down", b"next")
    assert c.connected and c.violations == 0
