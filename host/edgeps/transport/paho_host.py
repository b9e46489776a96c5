"""The host's MQTT client: paho-mqtt 2.x whose callbacks only enqueue raw messages.

The parameter server lives on its own thread; paho's network thread must never
wait for it, so `on_message` does a non-blocking put into a bounded queue and
counts what it had to drop when the queue is full.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt

from edgeps.transport.broker import BrokerAddress

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MqttOptions:
    """Credentials, TLS and session settings for one MQTT connection."""

    username: str | None = None
    password: str | None = None
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_insecure: bool = False
    keepalive: int = 30
    max_inflight: int = 200

    def check(self) -> None:
        """Raise a clear error for missing files or half-given credentials."""
        for label, path in (
            ("--tls-ca", self.tls_ca),
            ("--tls-cert", self.tls_cert),
            ("--tls-key", self.tls_key),
        ):
            if path is not None and not Path(path).is_file():
                raise FileNotFoundError(f"{label}: no such file: {path}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("--tls-cert and --tls-key must be given together")
        if self.password is not None and self.username is None:
            raise ValueError("--password needs --username")
        if self.keepalive < 5:
            raise ValueError(f"keepalive must be at least 5 s, got {self.keepalive}")

    @property
    def wants_tls(self) -> bool:
        return self.tls_ca is not None or self.tls_cert is not None


class HostClient:
    """A paho client that hands every received message to a bounded inbox queue."""

    def __init__(
        self,
        address: BrokerAddress,
        *,
        client_id: str,
        subscriptions: list[tuple[str, int]],
        options: MqttOptions | None = None,
        queue_size: int = 20000,
        queue_bytes: int = 256 << 20,
    ) -> None:
        self.options = options or MqttOptions()
        self.options.check()
        if queue_size < 1 or queue_bytes < 1:
            raise ValueError("queue_size and queue_bytes must be positive")
        self.address = address
        self.subscriptions = list(subscriptions)
        self.inbox: queue.Queue[tuple[str, bytes]] = queue.Queue(maxsize=queue_size)
        self.dropped = 0  # messages lost because the inbox was full
        # a flood of large payloads must not grow memory without bound either
        self.queue_bytes = queue_bytes
        self._held = 0
        self._held_lock = threading.Lock()
        self.connects = 0
        self.disconnects = 0
        self._connected = threading.Event()
        self._connect_error: str | None = None
        self._client = self._make_client(client_id)

    def _make_client(self, client_id: str) -> mqtt.Client:
        client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv311,
            clean_session=True,
        )
        opts = self.options
        if opts.username is not None:
            client.username_pw_set(opts.username, opts.password)
        if self.address.tls or opts.wants_tls:
            client.tls_set(
                ca_certs=opts.tls_ca,
                certfile=opts.tls_cert,
                keyfile=opts.tls_key,
                cert_reqs=ssl.CERT_NONE if opts.tls_insecure else ssl.CERT_REQUIRED,
            )
            client.tls_insecure_set(opts.tls_insecure)
        client.max_inflight_messages_set(opts.max_inflight)
        client.reconnect_delay_set(min_delay=1, max_delay=8)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        client.on_socket_open = _nodelay
        return client

    # paho callbacks: run on paho's network thread, must return at once
    def _on_connect(
        self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if reason.is_failure:
            self._connect_error = str(reason)
            log.warning("broker refused the connection: %s", reason)
            return
        self.connects += 1
        # clean session: subscriptions must be renewed on every (re)connect;
        # the link counts as up once the broker granted them (SUBACK), so
        # nothing published to us right after start() is lost
        if self.subscriptions:
            client.subscribe(self.subscriptions)
        else:
            self._connected.set()

    def _on_subscribe(
        self, client: mqtt.Client, userdata: Any, mid: int, reasons: Any, props: Any
    ) -> None:
        if any(r.is_failure for r in reasons):
            log.warning("broker refused a subscription: %s", reasons)
        self._connected.set()

    def _on_disconnect(
        self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        self._connected.clear()
        self.disconnects += 1
        if reason.is_failure:
            log.warning("disconnected from broker (%s); paho will reconnect", reason)

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: Any) -> None:
        size = len(msg.payload)
        with self._held_lock:
            if self._held + size > self.queue_bytes:
                self.dropped += 1
                return
            self._held += size
        try:
            self.inbox.put_nowait((msg.topic, msg.payload))
        except queue.Full:
            self._release(size)
            self.dropped += 1

    def _release(self, size: int) -> None:
        with self._held_lock:
            self._held -= size

    def _taken(self, item: tuple[str, bytes]) -> tuple[str, bytes]:
        self._release(len(item[1]))
        return item

    # API used from the coordinator thread
    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def will_set(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None:
        """Set the last will; call before `start`."""
        self._client.will_set(topic, payload, qos=qos, retain=retain)

    def start(self, timeout: float = 10.0) -> None:
        """Connect, start paho's thread, wait (bounded) for CONNACK and SUBACK."""
        try:
            self._client.connect(
                self.address.host, self.address.port, keepalive=self.options.keepalive
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionError(
                f"cannot connect to broker {self.address.url}: {exc}"
            ) from exc
        self._client.loop_start()
        deadline = time.monotonic() + timeout
        while not self._connected.wait(0.05):
            if self._connect_error is not None or time.monotonic() > deadline:
                self._client.loop_stop()
                why = self._connect_error or "no CONNACK/SUBACK in time"
                raise ConnectionError(f"broker {self.address.url} refused us: {why}")

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> mqtt.MQTTMessageInfo:
        """Queue one publish; paho resends unacknowledged QoS1 messages."""
        return self._client.publish(topic, payload, qos=qos, retain=retain)

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        """Next received (topic, payload), or None after at most `timeout` seconds."""
        try:
            return self._taken(self.inbox.get(timeout=timeout))
        except queue.Empty:
            return None

    def get_nowait(self) -> tuple[str, bytes] | None:
        try:
            return self._taken(self.inbox.get_nowait())
        except queue.Empty:
            return None

    def flush(self, timeout: float) -> bool:
        """Wait (bounded) until paho has no outgoing QoS>0 messages pending."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._client.want_write() is False and not self._pending():
                return True
            time.sleep(0.02)
        return False

    def _pending(self) -> bool:
        # paho keeps unacknowledged outgoing messages in this dict
        out = getattr(self._client, "_out_messages", None)
        return bool(out)

    def stop(self) -> None:
        """Disconnect cleanly and stop paho's thread."""
        try:
            self._client.disconnect()
        finally:
            self._client.loop_stop()
            self._connected.clear()


def _nodelay(client: Any, userdata: Any, sock: Any) -> None:
    """Turn Nagle off: with it, a small PUBACK ahead of a PARAMS costs a ~40 ms ACK."""
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
