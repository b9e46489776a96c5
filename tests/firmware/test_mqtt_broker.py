"""The firmware MQTT client against a real mosquitto, from CPython and MicroPython."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from edgeps_worker.mqtt import MQTTClient

from tests.conftest import FIRMWARE, Broker, run_micropython

SCENARIOS = str(Path(__file__).parents[1] / "helpers" / "mpy" / "mqtt_scenarios.py")
pytestmark = pytest.mark.integration


def _client(broker: Broker, name: str) -> MQTTClient:
    return MQTTClient(name, broker.host, broker.port, timeout_ms=2000)


def _wait_for(c: MQTTClient, topic: str, budget_ms: int = 5000) -> bytes | None:
    for _ in range(budget_ms // 100):
        got = c.poll(100)
        if got is not None and got[0] == topic:
            return got[1]
    return None


def test_connect_subscribe_qos1_round_trip(mosquitto: Broker) -> None:
    # Prepare
    c = _client(mosquitto, "cp-rt")
    c.connect("edgeps/j/up/w", b"lost")
    c.subscribe("edgeps/j/down/w", 1)
    payload = bytes(range(256)) * 40

    # Execute
    for _ in range(3):
        c.publish("edgeps/j/down/w", payload, 1)
    got = [_wait_for(c, "edgeps/j/down/w") for _ in range(3)]
    c.close()

    # Assert
    assert got == [payload] * 3 and c.dropped == 0


def test_retained_message_reaches_a_late_subscriber(mosquitto: Broker) -> None:
    # Prepare
    a = _client(mosquitto, "cp-ra")
    a.connect()
    a.publish("edgeps/j/model", b"model v3", 1, retain=True)
    a.close()
    b = _client(mosquitto, "cp-rb")
    b.connect()

    # Execute
    b.subscribe("edgeps/j/model", 1)
    got = _wait_for(b, "edgeps/j/model")
    b.close()

    # Assert
    assert got == b"model v3"


def test_last_will_is_delivered_when_the_socket_dies(mosquitto: Broker) -> None:
    # Prepare
    watcher = _client(mosquitto, "cp-ww")
    watcher.connect()
    watcher.subscribe("edgeps/j/up/+", 1)
    dying = _client(mosquitto, "cp-wd")
    dying.connect("edgeps/j/up/w9", b"lost")

    # Execute
    dying.close_link()
    got = _wait_for(watcher, "edgeps/j/up/w9")
    watcher.close()

    # Assert
    assert got == b"lost"


def test_clean_close_sends_no_last_will(mosquitto: Broker) -> None:
    # Prepare
    watcher = _client(mosquitto, "cp-nw")
    watcher.connect()
    watcher.subscribe("edgeps/j/up/+", 1)
    leaving = _client(mosquitto, "cp-nl")
    leaving.connect("edgeps/j/up/w8", b"lost")

    # Execute
    leaving.close()
    watcher.publish("edgeps/j/up/marker", b"m", 1)
    got = watcher.poll(3000)
    watcher.close()

    # Assert: the marker comes first and nothing else was queued
    assert got == ("edgeps/j/up/marker", b"m")


def test_reconnect_after_broker_restart(mosquitto: Broker) -> None:
    # Prepare: the worker loop's way: on OSError connect again and resubscribe
    c = MQTTClient("cp-rc", mosquitto.host, mosquitto.port, timeout_ms=1000)
    c.connect("edgeps/j/up/rc", b"lost")
    c.subscribe("edgeps/j/down/rc", 1)
    reconnects = 0

    # Execute
    mosquitto.restart()
    got = None
    for _ in range(60):
        try:
            if not c.connected:
                c.connect("edgeps/j/up/rc", b"lost")
                c.subscribe("edgeps/j/down/rc", 1)
                reconnects += 1
            c.publish("edgeps/j/down/rc", b"after", 1)
            got = _wait_for(c, "edgeps/j/down/rc")
            break
        except OSError:
            c.close_link()
            time.sleep(0.1)
    c.close()

    # Assert: the subscription was restored on the new session
    assert reconnects >= 1 and got == b"after"


def test_connect_to_a_closed_port_raises_oserror(mosquitto: Broker) -> None:
    # Prepare
    mosquitto.stop()
    c = _client(mosquitto, "cp-none")

    # Execute / Assert
    with pytest.raises(OSError):
        c.connect()
    assert not c.connected


@pytest.mark.firmware
def test_micropython_round_trip_retained_and_will(
    mosquitto: Broker, micropython: str
) -> None:
    # Execute
    proc = run_micropython(
        micropython, SCENARIOS, str(mosquitto.port), "roundtrip", "retained", "will"
    )

    # Assert
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:3] == ["ok roundtrip", "ok retained", "ok will"]


@pytest.mark.firmware
def test_micropython_reconnects_after_broker_restart(
    mosquitto: Broker, micropython: str
) -> None:
    # Prepare
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:.frozen")
    proc = subprocess.Popen(
        [micropython, SCENARIOS, str(mosquitto.port), "reconnect"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=FIRMWARE,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()

        # Execute
        mosquitto.restart()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)

    # Assert
    assert ready.strip() == "ready", err
    assert "ok reconnect" in out, out + err
