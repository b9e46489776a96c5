"""Broker selection: URL parsing, auto-selection, the embedded amqtt fallback."""

from __future__ import annotations

import threading

import paho.mqtt.client as mqtt
import pytest
from edgeps.transport import broker as brokers
from edgeps.transport.broker import BrokerAddress, open_broker, parse_broker_url


def test_parse_broker_url_defaults_and_tls() -> None:
    assert parse_broker_url("mqtt://example.org") == BrokerAddress("example.org", 1883)
    assert parse_broker_url("mqtts://h:9000") == BrokerAddress("h", 9000, True)
    assert parse_broker_url("mqtts://h").port == 8883


@pytest.mark.parametrize(
    "bad", ["localhost:1883", "http://h:1", "mqtt://:1883", "mqtt://h:99999", ""]
)
def test_bad_broker_specs_are_value_errors(bad: str) -> None:
    with pytest.raises(ValueError):
        open_broker(bad)


def test_external_url_launches_nothing() -> None:
    handle = open_broker("mqtt://10.0.0.5:1884")

    assert handle.kind == "external"
    assert handle.proc is None
    assert handle.url == "mqtt://10.0.0.5:1884"
    handle.close()


def _round_trip(host: str, port: int) -> bytes | None:
    """Subscribe, publish QoS1, return what came back (bounded wait)."""
    got: list[bytes] = []
    arrived = threading.Event()
    subscribed = threading.Event()
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)

    def on_message(c: mqtt.Client, u: object, msg: mqtt.MQTTMessage) -> None:
        got.append(msg.payload)
        arrived.set()

    client.on_message = on_message
    client.on_subscribe = lambda *a: subscribed.set()
    client.connect(host, port)
    client.loop_start()
    try:
        client.subscribe("edgeps/t/echo", 1)
        assert subscribed.wait(10)
        client.publish("edgeps/t/echo", b"ping", qos=1).wait_for_publish(10)
        arrived.wait(10)
    finally:
        client.disconnect()
        client.loop_stop()
    return got[0] if got else None


@pytest.mark.integration
def test_amqtt_fallback_starts_serves_and_stops() -> None:
    # Prepare
    if not brokers.amqtt_available():
        pytest.skip("amqtt (the demo extra) is not installed")

    # Execute
    handle = open_broker("amqtt")
    try:
        echoed = _round_trip(handle.host, handle.port)
    finally:
        handle.close()

    # Assert
    assert handle.kind == "amqtt"
    assert handle.host == "127.0.0.1"
    assert echoed == b"ping"
    assert handle.proc is not None and handle.proc.poll() is not None


@pytest.mark.integration
def test_auto_prefers_mosquitto_and_demo_prefers_amqtt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if brokers.mosquitto_path() is None or not brokers.amqtt_available():
        pytest.skip("needs both mosquitto and amqtt")

    with open_broker("auto") as serve_broker:
        assert serve_broker.kind == "mosquitto"
        assert _round_trip(serve_broker.host, serve_broker.port) == b"ping"
    with open_broker("auto", prefer="amqtt") as demo_broker:
        assert demo_broker.kind == "amqtt"

    assert serve_broker.proc is not None and serve_broker.proc.poll() is not None


@pytest.mark.integration
def test_auto_falls_back_to_amqtt_without_mosquitto(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Prepare: a machine where mosquitto is not installed
    if not brokers.amqtt_available():
        pytest.skip("amqtt (the demo extra) is not installed")
    monkeypatch.setattr(brokers, "mosquitto_path", lambda: None)

    # Execute
    with open_broker("auto") as handle:
        echoed = _round_trip(handle.host, handle.port)

    # Assert
    assert handle.kind == "amqtt"
    assert echoed == b"ping"


def test_no_broker_at_all_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(brokers, "mosquitto_path", lambda: None)
    monkeypatch.setattr(brokers, "amqtt_available", lambda: False)

    with pytest.raises(RuntimeError, match="no broker available"):
        open_broker("auto")
