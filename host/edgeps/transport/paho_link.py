"""The one paho-mqtt 2.x layer of the CPython side: host, `edgeps worker`, emulator.

`MqttLink` owns one paho client (``CallbackAPIVersion.VERSION2``, MQTT 3.1.1,
clean session) and one private network thread that turns a `Pump`
(``edgeps.transport.net_pump``: paho's external-loop API, one wake-up per
burst of publishes from other threads):

- every socket read and write happens on that thread (with
  ``on_socket_register_write`` set, paho never writes from the publishing
  thread, it wakes the network thread; an SSL socket must not be read and
  written from two threads), and
  keepalive pings go on while the caller computes;
- callbacks return at once: received messages go into a bounded inbox
  (count and bytes) and what does not fit is counted in ``dropped``;
- every socket it opens has TCP_NODELAY (with Nagle, a small PUBACK ahead of
  a PARAMS costs a ~40 ms delayed ACK);
- every connection attempt uses a fresh MQTT client id, the given name plus
  an unguessable suffix (`fresh_client_id`): the broker disconnects a client
  when another connects with the same id, so a fixed id would let anyone on
  the broker aim such a takeover at a known worker or at the host;
- a broker given as the nodes of one cluster (``--broker URL,URL``): each
  attempt tries the node in use, then the next ones (`next_node`).

`MqttLink` itself is the transport of the shared worker loop (connect,
subscribe, publish, poll, close, abort): a lost link raises OSError into the
caller, which backs off and calls ``connect`` again, as the board's client
does. `edgeps.transport.host_link.HostLink` is the coordinator's link: it
reconnects by itself (with `Backoff`), renews its subscriptions, counts as up
only after their SUBACK, and its ``publish`` never waits, so the coordinator
never blocks on the network. Reconnection lives in that subclass, not in
flags: two behaviours on one client, network thread and inbox.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edgeps.transport.broker import BrokerAddress
from edgeps.transport.inbox import Inbox
from edgeps.transport.net_pump import Pump
from edgeps.transport.options import ConnectionOptions

log = logging.getLogger(__name__)

CONNECT_ERRORS = (OSError, ssl.SSLError)
CLIENT_ID_SUFFIX_BYTES = 8  # 64 random bits per connection attempt


def fresh_client_id(name: str) -> str:
    """``name`` plus a random suffix: a client id nobody else can guess or reuse."""
    return f"{name}-{secrets.token_hex(CLIENT_ID_SUFFIX_BYTES)}"


class MqttLink:
    """One broker connection; the worker transport (OSError when the link is lost).

    Parameters
    ----------
    options: broker URL, TLS, credentials, keepalive.
    client_id: the name in the MQTT client id; each connection attempt adds
        a fresh random suffix (the id in use is `connection_id`).
    connect_timeout: seconds for TCP, TLS and CONNACK, and for a SUBACK.
    publish_timeout: seconds to wait for a PUBACK before declaring the link dead.
    queue_size, queue_bytes: bounds of the inbox of received messages.
    """

    max_inflight = 100

    def __init__(
        self,
        options: ConnectionOptions,
        client_id: str,
        *,
        connect_timeout: float = 10.0,
        publish_timeout: float = 10.0,
        queue_size: int = 10000,
        queue_bytes: int = 256 << 20,
    ) -> None:
        options.check()
        if options.starts_broker:
            raise ValueError(f"need an mqtt[s]:// broker URL, got {options.broker!r}")
        self.options = options
        self.addresses = options.addresses
        self._node = 0  # index in `addresses` of the node in use (or next to try)
        self.client_id = client_id
        self.connection_id = ""  # the MQTT client id of the latest attempt
        self.connect_timeout = connect_timeout
        self.publish_timeout = publish_timeout
        self._inbox = Inbox(queue_size, queue_bytes)
        self._client: mqtt.Client | None = None
        self._thread: threading.Thread | None = None
        self._pump: Pump | None = None
        self._stop = threading.Event()
        self._closing = False
        self._connack = threading.Event()
        self._connack_error: str | None = None
        self._lost = threading.Event()
        self._subacks: dict[int, bool] = {}  # mid -> granted
        self._suback_cv = threading.Condition()
        self.dropped = 0  # received messages that did not fit in the inbox
        self.connects = 0  # accepted CONNACKs
        self.disconnects = 0

    @property
    def address(self) -> BrokerAddress:
        """The broker node this link uses now (or tries next)."""
        return self.addresses[self._node]

    def next_node(self) -> BrokerAddress:
        """Fail over: make the next node of a broker cluster the one to try."""
        self._node = (self._node + 1) % len(self.addresses)
        return self.address

    @property
    def inbox(self) -> Inbox:
        """Received messages not yet taken (``qsize()`` is the depth)."""
        return self._inbox

    # -- paho callbacks: they run on the network thread and never block --

    def _on_connect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if reason.is_failure:
            self._connack_error = str(reason)
            log.warning(
                "broker %s refused the connection: %s", self.address.url, reason
            )
        else:
            self._connack_error = None
            self.connects += 1
        self._connack.set()

    def _on_subscribe(
        self, client: Any, userdata: Any, mid: int, reasons: Any, props: Any
    ) -> None:
        granted = not any(r.is_failure for r in reasons)
        if not granted:
            log.warning("broker refused a subscription: %s", reasons)
        with self._suback_cv:
            self._subacks[mid] = granted
            self._suback_cv.notify_all()

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        self.disconnects += 1
        self._lost.set()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        if not self._inbox.put((msg.topic, bytes(msg.payload))):
            self.dropped += 1
            if self.dropped & (self.dropped - 1) == 0:  # 1, 2, 4, ...: no flood
                log.warning(
                    "%s: inbox full, %d received messages dropped so far",
                    self.client_id,
                    self.dropped,
                )

    # -- the network thread --

    def _net_loop(self, client: mqtt.Client, pump: Pump) -> None:
        try:
            while not self._stop.is_set():
                try:
                    rc = pump.turn(client, 0.05)
                except Exception:  # a broken socket must end this loop, not hang it
                    log.exception("mqtt network loop failed")
                    rc = mqtt.MQTT_ERR_UNKNOWN
                if rc != mqtt.MQTT_ERR_SUCCESS:
                    self._lost.set()
                    if self._closing or not self._recover(client):
                        return
        finally:
            if self._pump is not pump:  # shut down from this very thread
                pump.close()

    def _recover(self, client: mqtt.Client) -> bool:
        """After a lost link: True to go on looping. The worker transport stops."""
        return False

    # -- building and opening a client --

    def _new_client(self) -> mqtt.Client:
        opts = self.options
        self.connection_id = fresh_client_id(self.client_id)
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.connection_id,
            clean_session=True,
            protocol=mqtt.MQTTv311,
        )
        client.connect_timeout = self.connect_timeout
        client.max_inflight_messages_set(self.max_inflight)
        opts.apply_to(client, self.address.tls)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        client.on_subscribe = self._on_subscribe
        client.on_socket_open = _nodelay
        return client

    def _open(self, client: mqtt.Client) -> None:
        """TCP (+TLS) connect, start the network thread, wait for CONNACK."""
        url = self.address.url
        self._stop.clear()
        self._closing = False
        self._connack.clear()
        self._connack_error = None
        self._lost.clear()
        self._inbox.clear()
        pump = Pump()
        client.on_socket_register_write = pump.wake
        try:
            client.connect(
                self.address.host, self.address.port, keepalive=self.options.keepalive
            )
        except CONNECT_ERRORS as exc:
            pump.close()
            raise ConnectionError(f"cannot connect to broker {url}: {exc}") from exc
        self._client = client
        self._pump = pump
        self._thread = threading.Thread(
            target=self._net_loop, args=(client, pump), name=f"mqtt-{self.client_id}"
        )
        self._thread.daemon = True
        self._thread.start()
        if not self._connack.wait(self.connect_timeout):
            self.close()
            raise ConnectionError(f"broker {url}: no CONNACK in time")
        if self._connack_error is not None:
            why = self._connack_error
            self.close()
            raise ConnectionError(f"broker {url} refused the connection: {why}")
        if self._lost.is_set():
            self.close()
            raise ConnectionError(f"broker {url}: connection lost right after CONNACK")

    # -- the worker transport interface --

    @property
    def connected(self) -> bool:
        return (
            self._client is not None
            and self._connack.is_set()
            and self._connack_error is None
            and not self._lost.is_set()
        )

    def _open_any(self, build: Callable[[], mqtt.Client]) -> None:
        """`_open` a fresh client on each node in turn; the first to accept stays."""
        errors: list[str] = []
        for _ in self.addresses:
            try:
                self._open(build())
                return
            except ConnectionError as exc:
                if len(self.addresses) == 1:
                    raise
                errors.append(str(exc))
                self.next_node()
        raise ConnectionError("no broker node accepted: " + "; ".join(errors))

    def connect(self, will_topic: str | None = None, will_payload: bytes = b"") -> None:
        """Open a clean session with this last will (QoS1); OSError on failure."""
        self.close()

        def build() -> mqtt.Client:
            client = self._new_client()
            if will_topic is not None:
                client.will_set(will_topic, bytes(will_payload), qos=1, retain=False)
            return client

        self._open_any(build)

    def _live_client(self) -> mqtt.Client:
        client = self._client
        if client is None or not self.connected:
            raise OSError("not connected")
        return client

    def subscribe(self, topic: str, qos: int = 1) -> None:
        """Subscribe and wait (bounded) for the SUBACK; OSError if refused or none."""
        rc, mid = self._live_client().subscribe(topic, qos=qos)
        if rc != mqtt.MQTT_ERR_SUCCESS:
            raise OSError(f"subscribe failed: {mqtt.error_string(rc)}")
        deadline = time.monotonic() + self.connect_timeout
        with self._suback_cv:
            while mid not in self._subacks:
                left = deadline - time.monotonic()
                if left <= 0 or self._lost.is_set():
                    raise OSError(f"no SUBACK for {topic}")
                self._suback_cv.wait(min(0.1, left))
            granted = self._subacks.pop(mid)
        if not granted:
            raise OSError(f"broker refused the subscription to {topic}")

    def publish_nowait(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> mqtt.MQTTMessageInfo:
        """Queue one publish for the network thread; paho resends unacked QoS1."""
        client = self._client
        if client is None:
            raise OSError("not connected")
        return client.publish(topic, bytes(payload), qos=qos, retain=retain)

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> Any:
        """Publish; for QoS1 return only after the PUBACK (OSError if none comes)."""
        self._live_client()
        info = self.publish_nowait(topic, payload, qos, retain)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            self._lost.set()
            raise OSError(f"publish failed: {mqtt.error_string(info.rc)}")
        if qos == 0:
            return info
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
        return info

    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None:
        """One incoming (topic, payload), or None after at most ``timeout_ms``."""
        item = self._inbox.get(None)
        if item is not None:
            return item
        if self._lost.is_set() or self._client is None:
            raise OSError("not connected")
        item = self._inbox.get(max(0, timeout_ms) / 1000.0)
        if item is None and self._lost.is_set():
            raise OSError("connection lost")
        return item

    def close(self) -> None:
        """Disconnect cleanly (no last will) and stop the network thread."""
        client, self._client = self._client, None
        if client is None:
            return
        self._closing = True
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
        self._closing = True
        sock = client.socket()
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._shutdown(client)

    def _shutdown(self, client: mqtt.Client) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        pump, self._pump = self._pump, None
        if pump is not None and (thread is None or not thread.is_alive()):
            pump.close()  # (a thread that outlived its join still selects on it)
        try:
            client._sock_close()  # no public API closes without DISCONNECT
        except Exception:
            log.debug("socket close failed", exc_info=True)
        self._lost.set()


def _nodelay(client: Any, userdata: Any, sock: Any) -> None:
    """Turn Nagle off on every socket paho opens (reconnects included)."""
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
