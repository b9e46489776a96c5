"""The coordinator's MQTT link: the one paho layer, reconnecting by itself.

See `edgeps.transport.paho_link` for the threading model it shares with the
worker transport.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt

from edgeps.transport.backoff import Backoff
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import CONNECT_ERRORS, MqttLink, fresh_client_id

log = logging.getLogger(__name__)


class HostLink(MqttLink):
    """The coordinator's link: reconnects by itself, ``get``/``publish`` never block.

    It satisfies the coordinator's ``Link`` protocol (get, get_nowait,
    publish). Subscriptions are renewed on every (re)connect (clean session)
    and the link counts as up once the broker granted them (SUBACK), so
    nothing published to us right after `start` is lost.

    ``on_up`` (settable later) is called on the network thread each time the
    link is up again, after the SUBACK: a broker restarted without persistence
    has lost every retained message, so the coordinator republishes its MODEL
    then. It must return at once (it only sets a flag).
    """

    # no window on unacknowledged releases (0: paho's "unlimited"). MQTT 3.1.1
    # has none on the broker's side, and with one paho walks every message in
    # flight on each PUBACK (``_update_inflight``) while a release beyond it
    # waits in paho's queue: under a backlog, hundreds of releases each PUBACK
    max_inflight = 0

    def __init__(
        self,
        options: ConnectionOptions,
        *,
        client_id: str,
        subscriptions: list[tuple[str, int]],
        queue_size: int = 20000,
        queue_bytes: int = 256 << 20,
        backoff: Backoff | None = None,
        on_up: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(
            options, client_id, queue_size=queue_size, queue_bytes=queue_bytes
        )
        self.subscriptions = list(subscriptions)
        self.backoff = backoff or Backoff(initial=0.25, maximum=8.0, jitter=0.2)
        self._up = threading.Event()
        self._will: tuple[str, bytes, int, bool] | None = None
        self.on_up = on_up
        self.refused: list[str] = []  # topics the broker refused at the last SUBACK

    def _on_connect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        super()._on_connect(client, userdata, flags, reason, props)
        if reason.is_failure:
            return
        self.backoff.reset()
        if self.subscriptions:
            client.subscribe(self.subscriptions)
        else:
            self._became_up()

    def _on_subscribe(
        self, client: Any, userdata: Any, mid: int, reasons: Any, props: Any
    ) -> None:
        refused = [
            topic
            for (topic, _), r in zip(self.subscriptions, reasons, strict=False)
            if r.is_failure
        ]
        if refused and refused != self.refused:
            log.warning("broker refused the subscriptions to %s", ", ".join(refused))
        self.refused = refused
        self._became_up()

    def _became_up(self) -> None:
        self._up.set()
        hook = self.on_up
        if hook is not None:
            try:
                hook()
            except Exception:  # the network thread must go on whatever it does
                log.exception("on_up hook failed")

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        self._up.clear()
        super()._on_disconnect(client, userdata, flags, reason, props)
        if reason.is_failure and not self._closing:
            log.warning("disconnected from broker (%s); reconnecting", reason)

    def _recover(self, client: mqtt.Client) -> bool:
        while not self._closing:
            if self._stop.wait(self.backoff.next()):
                return False
            # a fresh id per attempt, like a new client would get; paho has no
            # public setter and reconnect() reuses the one it was built with
            self.connection_id = fresh_client_id(self.client_id)
            client._client_id = self.connection_id.encode()
            node = self.address
            try:
                if len(self.addresses) == 1:
                    client.reconnect()
                else:  # the node may have changed: reconnect() keeps the old one
                    client.connect(node.host, node.port, self.options.keepalive)
            except CONNECT_ERRORS as exc:
                log.info("reconnect to %s failed: %s", node.url, exc)
                if len(self.addresses) > 1:
                    log.info("failing over to broker node %s", self.next_node().url)
                continue
            self._lost.clear()
            return True
        return False

    @property
    def connected(self) -> bool:
        return self._up.is_set()

    def will_set(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None:
        """Set the last will; call before `start`."""
        self._will = (topic, bytes(payload), qos, retain)

    def start(self, timeout: float = 10.0) -> None:
        """Connect and wait (bounded) for CONNACK and SUBACK; ConnectionError if not."""
        self.close()

        def build() -> mqtt.Client:
            client = self._new_client()
            if self._will is not None:
                topic, payload, qos, retain = self._will
                client.will_set(topic, payload, qos=qos, retain=retain)
            return client

        self._up.clear()
        self._open_any(build)
        if not self._up.wait(timeout):
            self.close()
            raise ConnectionError(f"broker {self.address.url}: no SUBACK in time")

    def wait_connected(self, timeout: float) -> bool:
        return self._up.wait(timeout)

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> mqtt.MQTTMessageInfo:
        """Queue one publish and return at once; paho resends unacked QoS1."""
        return self.publish_nowait(topic, payload, qos, retain)

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        """Next received (topic, payload), or None after at most ``timeout`` s."""
        return self._inbox.get(max(0.0, timeout))

    def get_nowait(self) -> tuple[str, bytes] | None:
        return self._inbox.get(None)

    def flush(self, timeout: float) -> bool:
        """Wait (bounded) until paho has no outgoing QoS>0 messages pending."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            client = self._client
            if client is None:
                return False
            # paho keeps unacknowledged outgoing messages in this dict
            if not client.want_write() and not getattr(client, "_out_messages", None):
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        """Disconnect cleanly and stop the network thread."""
        self.close()
        self._up.clear()
