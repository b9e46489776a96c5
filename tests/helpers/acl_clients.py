"""Test helpers for the ACL tests: a broker run from `edgeps broker-config`'s
files, and a small paho client that records what it is sent."""

from __future__ import annotations

import queue
import secrets
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import paho.mqtt.client as mqtt
from edgeps.transport.broker import wait_listening

from tests.conftest import mosquitto_path

WAIT = 10.0  # seconds, for every single wait below


@dataclass
class GeneratedBroker:
    """A mosquitto started from a generated config, stopped by pid."""

    conf: Path
    port: int
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        exe = mosquitto_path()
        assert exe is not None, "mosquitto is not installed"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [exe, "-c", str(self.conf)], stdout=log, stderr=subprocess.STDOUT
            )
        if not wait_listening("127.0.0.1", self.port, WAIT):
            self.stop()
            raise RuntimeError(f"mosquitto did not start: {self.log.read_text()}")

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


class RecordingClient:
    """A paho client (MQTT 3.1.1) that keeps every message it receives."""

    def __init__(self, port: int, user: str | None, password: str | None) -> None:
        self.port = port
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"acl-test-{user}-{secrets.token_hex(4)}",
            protocol=mqtt.MQTTv311,
        )
        if user is not None:
            self.client.username_pw_set(user, password)
        self.connack = threading.Event()
        self.reason: mqtt.ReasonCode | None = None
        self.messages: queue.Queue[tuple[str, bytes, bool]] = queue.Queue()
        self.granted: queue.Queue[list[int]] = queue.Queue()
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        self.client.on_subscribe = self._on_subscribe

    def _on_connect(
        self, c: mqtt.Client, u: object, f: object, rc: object, p: object
    ) -> None:
        assert isinstance(rc, mqtt.ReasonCode)
        if self.reason is None:
            self.reason = rc
        self.connack.set()

    def _on_message(self, c: mqtt.Client, u: object, msg: mqtt.MQTTMessage) -> None:
        self.messages.put((msg.topic, msg.payload, bool(msg.retain)))

    def _on_subscribe(
        self, c: mqtt.Client, u: object, mid: int, rcs: list, p: object
    ) -> None:
        self.granted.put([rc.value for rc in rcs])

    def connect(self) -> bool:
        """True when the broker accepted us; the first CONNACK decides."""
        self.client.connect("127.0.0.1", self.port, keepalive=30)
        self.client.loop_start()
        if not self.connack.wait(WAIT):
            raise TimeoutError("no CONNACK")
        assert self.reason is not None
        return not self.reason.is_failure

    def subscribe(self, *topics: str) -> list[int]:
        """Subscribe (QoS 1) and return the granted codes (0x80 = refused)."""
        self.client.subscribe([(t, 1) for t in topics])
        return self.granted.get(timeout=WAIT)

    def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> None:
        """Publish at QoS 1 and wait for the broker's PUBACK."""
        info = self.client.publish(topic, payload, qos=1, retain=retain)
        info.wait_for_publish(WAIT)
        assert info.is_published(), f"no PUBACK for {topic}"

    def until(self, topic: str, payload: bytes) -> list[tuple[str, bytes, bool]]:
        """Every message received up to and including (topic, payload)."""
        seen = []
        while True:
            got = self.messages.get(timeout=WAIT)
            seen.append(got)
            if got[:2] == (topic, payload):
                return seen

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
