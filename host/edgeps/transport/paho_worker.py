"""A paho-mqtt 2.x transport for the shared worker loop on CPython.

It implements the duck-typed worker transport (connect, subscribe, publish,
poll, close, connected) with one paho client per connection. A private
network thread drives ``client.loop()``, so keepalive pings go on while the
worker computes; paho's own auto-reconnect is never used: a lost link raises
``OSError`` into the worker loop, which backs off and calls ``connect`` again
(a clean session each time), exactly like the board's MQTT client.
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
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TLSOptions:
    """TLS settings: CA bundle, client certificate and key, skip hostname check."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure: bool = False


class PahoTransport:
    """Worker transport over paho-mqtt: queue-fed ``poll``, bounded QoS1 publish.

    Parameters
    ----------
    host, port: the broker.
    client_id: MQTT client id (the worker id is a good choice).
    keepalive: seconds between pings; the broker fires the last will after
        1.5x this without traffic.
    tls: TLS options, or None for plain TCP.
    publish_timeout: seconds to wait for a PUBACK before declaring the link dead.
    max_queue: incoming messages kept before further ones are dropped (counted).
    """

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        *,
        keepalive: int = 20,
        username: str | None = None,
        password: str | None = None,
        tls: TLSOptions | None = None,
        connect_timeout: float = 10.0,
        publish_timeout: float = 10.0,
        max_queue: int = 10000,
    ) -> None:
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port must be 1..65535, got {port!r}")
        if keepalive < 1:
            raise ValueError("keepalive must be at least 1 second")
        if password is not None and username is None:
            raise ValueError("a password needs a username")
        self.host = host
        self.port = port
        self.client_id = client_id
        self.keepalive = keepalive
        self.username = username
        self.password = password
        self.tls = tls
        self.connect_timeout = connect_timeout
        self.publish_timeout = publish_timeout
        self._queue: queue.Queue[tuple[str, bytes]] = queue.Queue(max_queue)
        self._client: mqtt.Client | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._connack = threading.Event()
        self._connack_rc = 0
        self._lost = threading.Event()
        self.dropped_incoming = 0
        self.connects = 0

    # -- paho callbacks: they run on the network thread and never block --

    def _on_connect(
        self, client: Any, userdata: Any, flags: Any, reason_code: Any, props: Any
    ) -> None:
        self._connack_rc = 0 if not reason_code.is_failure else int(reason_code.value)
        self._connack.set()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason_code: Any, props: Any
    ) -> None:
        self._lost.set()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        try:
            self._queue.put_nowait((msg.topic, bytes(msg.payload)))
        except queue.Full:
            self.dropped_incoming += 1

    def _net_loop(self, client: mqtt.Client) -> None:
        while not self._stop.is_set():
            try:
                rc = client.loop(timeout=0.05)
            except Exception:  # a broken socket must end this thread, not hang it
                log.exception("mqtt network loop failed")
                rc = mqtt.MQTT_ERR_UNKNOWN
            if rc != mqtt.MQTT_ERR_SUCCESS:
                self._lost.set()
                return

    # -- the worker transport interface --

    @property
    def connected(self) -> bool:
        return (
            self._client is not None
            and self._connack.is_set()
            and self._connack_rc == 0
            and not self._lost.is_set()
        )

    def connect(self, will_topic: str | None = None, will_payload: bytes = b"") -> None:
        """Open a clean session with the given last will (QoS1); OSError on failure."""
        self.close()
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            clean_session=True,
            protocol=mqtt.MQTTv311,
        )
        client.connect_timeout = self.connect_timeout
        client.max_inflight_messages_set(100)
        if will_topic is not None:
            client.will_set(will_topic, bytes(will_payload), qos=1, retain=False)
        if self.username is not None:
            client.username_pw_set(self.username, self.password)
        if self.tls is not None:
            client.tls_set(
                ca_certs=self.tls.ca,
                certfile=self.tls.cert,
                keyfile=self.tls.key,
                cert_reqs=ssl.CERT_NONE if self.tls.insecure else ssl.CERT_REQUIRED,
            )
            client.tls_insecure_set(self.tls.insecure)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        # with this hook set, paho never writes from the publishing thread: all
        # socket I/O stays on the network thread (an SSL socket is not safe
        # to read and write from two threads at once)
        client.on_socket_register_write = _write_on_network_thread
        self._stop.clear()
        self._connack.clear()
        self._lost.clear()
        self._drain()
        try:
            client.connect(self.host, self.port, keepalive=self.keepalive)
        except (OSError, ssl.SSLError) as exc:
            raise OSError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        sock = client.socket()
        if isinstance(sock, socket.socket):
            # paho leaves Nagle on: a QoS1 round trip would then wait for the
            # peer's delayed ACK (~40 ms) instead of ~0.1 ms on a LAN
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client = client
        self._thread = threading.Thread(
            target=self._net_loop, args=(client,), name=f"mqtt-{self.client_id}"
        )
        self._thread.daemon = True
        self._thread.start()
        if not self._connack.wait(self.connect_timeout):
            self.close()
            raise OSError("no CONNACK from the broker")
        if self._connack_rc != 0:
            rc = self._connack_rc
            self.close()
            raise OSError(f"broker refused the connection (reason {rc})")
        if self._lost.is_set():
            self.close()
            raise OSError("connection lost right after CONNACK")
        self.connects += 1

    def _live_client(self) -> mqtt.Client:
        client = self._client
        if client is None or not self.connected:
            raise OSError("not connected")
        return client

    def subscribe(self, topic: str, qos: int = 1) -> None:
        client = self._live_client()
        rc, _mid = client.subscribe(topic, qos=qos)
        if rc != mqtt.MQTT_ERR_SUCCESS:
            raise OSError(f"subscribe failed: {mqtt.error_string(rc)}")

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None:
        """Publish; for QoS1 return only after the PUBACK (OSError if none comes)."""
        client = self._live_client()
        info = client.publish(topic, bytes(payload), qos=qos, retain=retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            self._lost.set()
            raise OSError(f"publish failed: {mqtt.error_string(info.rc)}")
        if qos == 0:
            return
        deadline = time.monotonic() + self.publish_timeout
        # wait in slices so a lost link is noticed before the full timeout
        while not info.is_published():
            if self._lost.is_set():
                raise OSError("connection lost while waiting for PUBACK")
            left = deadline - time.monotonic()
            if left <= 0:
                # MQTT 3.1.1 resends only on reconnect: a silent link is dead
                self._lost.set()
                raise OSError("no PUBACK within the publish timeout")
            try:
                info.wait_for_publish(min(0.1, left))
            except (RuntimeError, ValueError) as exc:
                self._lost.set()
                raise OSError(f"publish failed: {exc}") from exc

    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None:
        """One incoming (topic, payload), or None after at most ``timeout_ms``."""
        try:
            return self._queue.get_nowait()
        except queue.Empty:
            pass
        if self._lost.is_set() or self._client is None:
            raise OSError("not connected")
        try:
            return self._queue.get(timeout=max(0, timeout_ms) / 1000.0)
        except queue.Empty:
            if self._lost.is_set():
                raise OSError("connection lost") from None
            return None

    def close(self) -> None:
        """Disconnect cleanly (no last will) and stop the network thread."""
        client, self._client = self._client, None
        if client is None:
            return
        try:
            client.disconnect()
        except Exception:  # closing a half-dead socket may fail; nothing to keep
            log.debug("disconnect failed", exc_info=True)
        # DISCONNECT is written by the network thread; cutting the socket
        # before it goes out would make the broker publish the last will
        self._lost.wait(1.0)
        self._shutdown(client)

    def abort(self) -> None:
        """Drop the TCP link without DISCONNECT, as a crash would: the will fires."""
        client, self._client = self._client, None
        if client is None:
            return
        sock = client.socket()
        if isinstance(sock, socket.socket | ssl.SSLSocket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._shutdown(client)

    def _shutdown(self, client: mqtt.Client) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        try:
            client._sock_close()  # no public API closes without DISCONNECT
        except Exception:
            log.debug("socket close failed", exc_info=True)
        self._lost.set()

    def _drain(self) -> None:
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                return


def _write_on_network_thread(client: Any, userdata: Any, sock: Any) -> None:
    """Nothing to do: the network thread's select already watches for writes."""
