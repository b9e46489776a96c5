"""The network thread's Pump on a real mosquitto: no paho socket pair, one wake
per burst of publishes from another thread, everything delivered both ways."""

from __future__ import annotations

import threading
import time
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.transport.host_link import HostLink
from edgeps.transport.options import ConnectionOptions

pytestmark = pytest.mark.integration


def _link(broker: Any, name: str, topic: str) -> HostLink:
    link = HostLink(
        ConnectionOptions(broker.url), client_id=name, subscriptions=[(topic, 1)]
    )
    link.start()
    return link


def test_a_burst_of_publishes_is_delivered_with_fewer_wakes(mosquitto: Any) -> None:
    sink = _link(mosquitto, "pump-sink", "pump/#")
    src = _link(mosquitto, "pump-src", "none/#")
    try:
        client = src._client
        assert client is not None
        assert client._sockpairW is None  # paho's own wake-up pair is never made
        pump = src._pump
        assert pump is not None
        before = pump.wakes
        n = 500
        for i in range(n):  # from this thread, not the network thread
            src.publish(f"pump/{i % 7}", b"%d" % i)
        got = []
        deadline = time.monotonic() + 20
        while len(got) < n and time.monotonic() < deadline:
            item = sink.get(0.1)
            if item is not None:
                got.append(item)
        assert sorted(int(p) for _, p in got) == list(range(n))
        assert 1 <= pump.wakes - before < n  # a wake per burst, not per packet
        assert src.flush(10.0)  # every PUBACK came back through the pump
    finally:
        src.stop()
        sink.stop()


def test_a_wake_from_the_network_thread_itself_writes_nothing(mosquitto: Any) -> None:
    link = _link(mosquitto, "pump-self", "self/#")
    try:
        pump = link._pump
        assert pump is not None
        before = pump.wakes
        done = threading.Event()

        def on_up() -> None:  # runs on the network thread
            pump.wake()
            done.set()

        link.on_up = on_up
        link._became_up()  # as after a SUBACK, but from here: this one writes
        assert pump.wakes == before + 1
        done.clear()
        thread_wakes = pump.wakes
        client = link._client
        assert client is not None
        client.subscribe("self/again", 1)  # the SUBACK calls on_up on the thread
        assert done.wait(10)
        assert pump.wakes - thread_wakes <= 1  # the subscribe's own wake, not on_up's
    finally:
        link.stop()


def test_stop_closes_the_wake_pair(mosquitto: Any) -> None:
    link = _link(mosquitto, "pump-close", "close/#")
    pump = link._pump
    assert pump is not None
    link.stop()
    assert pump._wake_r.fileno() == -1 and pump._wake_w.fileno() == -1


def test_no_release_waits_behind_an_inflight_window(mosquitto: Any) -> None:
    src = _link(mosquitto, "pump-window", "none/#")
    try:
        client = src._client
        assert client is not None
        for i in range(1000):  # far more than paho's in-flight windows of 20-200
            src.publish(f"win/{i}", b"x")
        states = [m.state for m in list(client._out_messages.values())]
        assert mqtt.mqtt_ms_queued not in states  # each went to the socket at once
        assert src.flush(20.0)
    finally:
        src.stop()
