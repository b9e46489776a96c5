"""The host's paho client: bounded inbox with drop counting, clean reconnects."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.transport.host_link import HostLink
from edgeps.transport.options import ConnectionOptions

pytestmark = pytest.mark.integration


def _publisher(broker: Any) -> mqtt.Client:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    client.connect(broker.host, broker.port)
    client.loop_start()
    return client


def _drain(link: HostLink, n: int, timeout: float) -> list[tuple[str, bytes]]:
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        item = link.get(0.1)
        if item is not None:
            out.append(item)
    return out


def test_full_inbox_drops_and_counts_instead_of_blocking(mosquitto: Any) -> None:
    # Prepare: an inbox of 5 that nobody reads
    link = HostLink(
        ConnectionOptions(mosquitto.url),
        client_id="host-small",
        subscriptions=[("t/#", 1)],
        queue_size=5,
    )
    link.start()
    pub = _publisher(mosquitto)
    try:
        # Execute
        for i in range(20):
            pub.publish("t/x", str(i).encode(), qos=1).wait_for_publish(10)
        deadline = time.monotonic() + 10
        while link.dropped < 15 and time.monotonic() < deadline:
            time.sleep(0.05)
        got = _drain(link, 5, 5)
    finally:
        pub.disconnect()
        pub.loop_stop()
        link.stop()

    # Assert: paho's thread never waited on us; the first five are kept in order
    assert link.dropped == 15
    assert [p for _, p in got] == [b"0", b"1", b"2", b"3", b"4"]


def test_reconnects_and_resubscribes_after_broker_restart(mosquitto: Any) -> None:
    # Prepare
    link = HostLink(
        ConnectionOptions(mosquitto.url),
        client_id="host-re",
        subscriptions=[("r/#", 1)],
    )
    link.start()
    try:
        # Execute: the broker goes away and comes back on the same port
        mosquitto.restart()
        assert link.wait_connected(20)
        deadline = time.monotonic() + 20
        while link.connects < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # the renewed SUBSCRIBE reaches the broker
        pub = _publisher(mosquitto)
        pub.publish("r/1", b"after", qos=1).wait_for_publish(10)
        got = _drain(link, 1, 10)
        pub.disconnect()
        pub.loop_stop()
    finally:
        link.stop()

    # Assert
    assert link.connects == 2 and link.disconnects >= 1
    assert got == [("r/1", b"after")]


def test_wrong_credentials_or_files_are_clear_errors(tmp_path: Path) -> None:
    tls = "mqtts://127.0.0.1:9"
    cert = tmp_path / "cert.pem"
    cert.write_text("not checked before the key is given too")
    with pytest.raises(FileNotFoundError, match="--tls-ca"):
        HostLink(
            ConnectionOptions(tls, tls_ca=str(tmp_path / "ca.pem")),
            client_id="x",
            subscriptions=[],
        )
    with pytest.raises(ValueError, match="together"):
        HostLink(
            ConnectionOptions(tls, tls_cert=str(cert)),
            client_id="x",
            subscriptions=[],
        )
    with pytest.raises(ValueError, match="--username"):
        HostLink(
            ConnectionOptions("mqtt://127.0.0.1:9", password="p"),
            client_id="x",
            subscriptions=[],
        )
    with pytest.raises(ConnectionError, match="cannot connect"):
        plain = ConnectionOptions("mqtt://127.0.0.1:9")
        HostLink(plain, client_id="x", subscriptions=[]).start(timeout=2)


def test_inbox_is_bounded_in_bytes_too(mosquitto: Any) -> None:
    # Prepare: room for two 1000-byte payloads
    link = HostLink(
        ConnectionOptions(mosquitto.url),
        client_id="host-bytes",
        subscriptions=[("b/#", 1)],
        queue_bytes=2500,
    )
    link.start()
    pub = _publisher(mosquitto)
    try:
        # Execute
        for _ in range(5):
            pub.publish("b/x", bytes(1000), qos=1).wait_for_publish(10)
        deadline = time.monotonic() + 10
        while link.dropped < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        first = _drain(link, 2, 5)
        pub.publish("b/x", bytes(1000), qos=1).wait_for_publish(10)
        after = _drain(link, 1, 5)  # room again once the first two were taken
    finally:
        pub.disconnect()
        pub.loop_stop()
        link.stop()

    # Assert
    assert link.dropped == 3
    assert len(first) == 2 and len(after) == 1
