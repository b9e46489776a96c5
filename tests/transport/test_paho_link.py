"""The paho worker transport against a real broker: delivery, last will, bounds."""

from __future__ import annotations

import signal

import pytest
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink


def _transport(port: int, cid: str) -> MqttLink:
    opts = ConnectionOptions(f"mqtt://127.0.0.1:{port}", keepalive=5)
    return MqttLink(opts, cid, connect_timeout=5)


def _poll_for(t: MqttLink, topic: str, tries: int = 50) -> bytes | None:
    """Poll (bounded) until a message on ``topic`` arrives."""
    for _ in range(tries):
        msg = t.poll(100)
        if msg is not None and msg[0] == topic:
            return msg[1]
    return None


@pytest.mark.integration
def test_qos1_publish_is_delivered_and_poll_times_out_when_idle(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    a, b = _transport(mosquitto.port, "a"), _transport(mosquitto.port, "b")
    a.connect("will/a", b"")
    b.connect("will/b", b"")
    b.subscribe("data/#", 1)
    try:
        # Execute
        idle = b.poll(50)
        for i in range(20):
            a.publish("data/x", bytes([i]) * 5000, 1)
        got = [_poll_for(b, "data/x") for _ in range(20)]
    finally:
        a.close()
        b.close()
    # Assert
    assert idle is None
    assert got == [bytes([i]) * 5000 for i in range(20)]
    assert not a.connected and not b.connected


@pytest.mark.integration
def test_abort_fires_the_last_will_and_close_does_not(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    watcher = _transport(mosquitto.port, "watch")
    watcher.connect("will/watch", b"")
    watcher.subscribe("will/#", 1)
    polite = [_transport(mosquitto.port, f"p{i}") for i in range(10)]
    for i, p in enumerate(polite):
        p.connect(f"will/p{i}", b"polite gone")
    crashing = _transport(mosquitto.port, "c")
    crashing.connect("will/c", b"crashed")
    try:
        # Execute
        for p in polite:
            p.close()
        crashing.abort()
        will = _poll_for(watcher, "will/c")
        stray = watcher.poll(300)
    finally:
        watcher.close()
    # Assert
    assert will == b"crashed"
    assert stray is None  # the polite ones left no will behind


@pytest.mark.integration
def test_dead_link_raises_oserror_instead_of_hanging(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    t = _transport(mosquitto.port, "d")
    t.connect("will/d", b"")
    # Execute
    mosquitto.stop()
    with pytest.raises(OSError):
        for _ in range(100):  # bounded: the loss shows within a few polls
            t.poll(100)
    with pytest.raises(OSError):
        t.publish("x/y", b"z", 1)
    t.close()
    # Assert
    assert not t.connected


@pytest.mark.integration
def test_reconnect_is_a_fresh_clean_session(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    t = _transport(mosquitto.port, "r")
    other = _transport(mosquitto.port, "o")
    t.connect("will/r", b"")
    t.subscribe("old/#", 1)
    other.connect("will/o", b"")
    try:
        # Execute
        t.connect("will/r", b"")  # again, as the worker loop does after a drop
        other.publish("old/x", b"1", 1)
        after = t.poll(300)
    finally:
        t.close()
        other.close()
    # Assert
    assert after is None  # a clean session forgets the old subscription
    assert t.connects == 2


@pytest.mark.integration
def test_subscribe_waits_for_the_suback(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: a connected link, then a broker that stops answering
    opts = ConnectionOptions(mosquitto.url, keepalive=5)
    t = MqttLink(opts, "sub", connect_timeout=1.0)
    t.connect("will/sub", b"")
    t.subscribe("answered/#", 1)  # a live broker grants it
    mosquitto.proc.send_signal(signal.SIGSTOP)
    try:
        # Execute / Assert: no SUBACK within the bound is an error, not a hang
        with pytest.raises(OSError, match="no SUBACK"):
            t.subscribe("unanswered/#", 1)
    finally:
        mosquitto.proc.send_signal(signal.SIGCONT)
        t.close()
