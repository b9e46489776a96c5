"""One selector loop over many paho clients, and the worker transport on it.

`EventLoop` watches every sensor's socket with ``selectors`` (epoll), runs
timers (`edgeps.emulate.timers.Timers`) and calls paho's external-loop API:
``loop_read`` when a socket is readable, ``loop_write`` while ``want_write``,
``loop_misc`` for keepalive once a second. `LoopLink` is the shared worker
loop's transport over one such client: ``publish`` never blocks (QoS1 is
acknowledged later, paho keeps the message), it is held while the sensor
"computes" and after a drawn link delay (`SendQueue`), and received messages
go to a callback instead of an inbox, once paho's read has returned: never
from inside paho's own callback, which holds a lock that a handler closing
its link (a sensor leaving on a STOP) would wait on forever.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edgeps.emulate.timers import SendQueue, Timers
from edgeps.emulate.usage import UsageMeter
from edgeps.netem.impair import ImpairedTransport
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import fresh_client_id

log = logging.getLogger(__name__)

MISC_PERIOD = 1.0  # seconds between loop_misc passes (keepalive pings)
# sockets handled between two runs of the due timers within one turn: a turn
# over a thousand readable sensors lasts a few hundred ms, and the UPDATEs due
# meanwhile (held for their compute) should not all wait for its end
TIMERS_EVERY = 32
# packets one readable event reads at most: paho's loop_read reads one packet
# when nothing is in flight, so a release (shared PARAMS + RELEASE) took two
# turns over every sensor, the second read a whole turn after it arrived
READS_PER_EVENT = 16


def _has_more(sock: Any) -> bool:
    """Whether a socket has bytes still to read, without blocking or taking them."""
    if isinstance(sock, ssl.SSLSocket):
        return sock.pending() > 0
    if not isinstance(sock, socket.socket):
        return False
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return False  # the next read (the next select) reports it


class EventLoop:
    """Selector + timers; ``run(done, deadline)`` turns until one says stop."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.now = clock
        self.timers = Timers()
        self._sel = selectors.DefaultSelector()
        self._links: set[LoopLink] = set()
        self._writers: set[LoopLink] = set()
        self._next_misc = 0.0
        self.turns = 0
        # when the last select returned: what it found readable had arrived by
        # then, however long the loop then takes to get to each socket
        self.selected_at = 0.0

    def add(self, link: LoopLink, fd: int) -> None:
        self._sel.register(fd, selectors.EVENT_READ, link)
        self._links.add(link)

    def remove(self, link: LoopLink, fd: int) -> None:
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(fd)
        self._links.discard(link)
        self._writers.discard(link)

    def wake_writer(self, link: LoopLink) -> None:
        self._writers.add(link)

    @property
    def n_links(self) -> int:
        return len(self._links)

    def run(self, done: Callable[[], bool], deadline: float | None = None) -> None:
        while not done():
            now = self.now()
            if deadline is not None and now >= deadline:
                return
            self.turn(now, deadline)

    def turn(self, now: float, deadline: float | None = None) -> None:
        """Write what waits, wait for sockets or the next timer, handle both."""
        self.turns += 1
        self._flush_writers()
        nxt = self.timers.next_at()
        timeout = 0.2 if nxt is None else min(0.2, max(0.0, nxt - now))
        if deadline is not None:
            timeout = min(timeout, max(0.0, deadline - now))
        events = self._sel.select(timeout)
        self.selected_at = self.now()
        for i, (key, mask) in enumerate(events, 1):
            link: LoopLink = key.data
            if mask & selectors.EVENT_READ:
                link.on_readable()
            if mask & selectors.EVENT_WRITE:
                link.on_writable()
            if i % TIMERS_EVERY == 0:
                self.timers.run_due(self.now())
        now = self.now()
        self.timers.run_due(now)
        if now >= self._next_misc:
            self._next_misc = now + MISC_PERIOD
            for link in list(self._links):
                link.misc()

    def _flush_writers(self) -> None:
        while self._writers:
            link = self._writers.pop()
            link.on_writable()

    def set_write_interest(self, link: LoopLink, fd: int, on: bool) -> None:
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if on else 0)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.modify(fd, events, link)

    def close(self) -> None:
        self._sel.close()


class LoopLink:
    """The worker transport of one sensor over one paho client on an `EventLoop`.

    ``on_message(topic, payload)`` gets every received message, after the
    read that brought it (the handler may publish, close or abort the link);
    ``on_lost()`` is called once when a live link breaks (not after close or
    abort). ``impair`` draws each publish's link delay (its ``plan``), or None;
    ``meter`` is told every payload as it leaves or arrives.
    """

    max_inflight = 100

    def __init__(
        self,
        loop: EventLoop,
        options: ConnectionOptions,
        name: str,
        on_message: Callable[[str, bytes], None],
        on_lost: Callable[[], None],
        impair: ImpairedTransport | None = None,
        meter: UsageMeter | None = None,
    ) -> None:
        self.loop = loop
        self.meter = meter
        self.options = options
        self.address = options.address
        self.name = name
        self.on_message = on_message
        self.on_lost = on_lost
        self.impair = impair
        self.sendq = SendQueue()
        self.arrived_by = 0.0  # see on_readable
        # what paho's callback received during one read, handed on after it
        self._got: deque[tuple[str, bytes]] = deque()
        self._client: mqtt.Client | None = None
        self._fd = -1
        self._live = False
        self._writing = False
        self._flush_at: float | None = None
        self.connection_id = ""
        self.connects = 0
        self.retransmits = 0

    # -- the worker transport --

    @property
    def connected(self) -> bool:
        return self._client is not None and self._live

    def connect(self, will_topic: str | None = None, will_payload: bytes = b"") -> None:
        self._drop()
        self.sendq.clear()  # a new link never sends what the last one held
        self._flush_at = None
        opts = self.options
        self.connection_id = fresh_client_id(self.name)
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=self.connection_id,
            clean_session=True,
            protocol=mqtt.MQTTv311,
        )
        client.max_inflight_messages_set(self.max_inflight)
        client.max_queued_messages_set(0)
        opts.apply_to(client, self.address.tls)
        if will_topic is not None:
            client.will_set(will_topic, bytes(will_payload), qos=1, retain=False)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        client.on_message = self._on_message
        try:
            client.connect(
                self.address.host, self.address.port, keepalive=opts.keepalive
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConnectionError(
                f"cannot connect to {self.address.url}: {exc}"
            ) from exc
        sock = client.socket()
        if isinstance(sock, socket.socket):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._client = client
        self._live = True
        self._fd = sock.fileno() if sock is not None else -1
        self.loop.add(self, self._fd)
        self._after_io()

    def subscribe(self, topic: str, qos: int = 1) -> None:
        rc, _ = self._live_client().subscribe(topic, qos=qos)
        if rc != mqtt.MQTT_ERR_SUCCESS:
            raise OSError(f"subscribe failed: {mqtt.error_string(rc)}")
        self._after_io()

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None:
        """Send now, or when the compute hold and the drawn link delay are over."""
        self._live_client()
        delay = 0.0
        if self.impair is not None:
            delay, retx, _ = self.impair.plan(qos)
            self.retransmits += retx
        now = self.loop.now()
        at = self.sendq.add(now, delay, topic, payload, qos, retain)
        if at is None:
            self._send(topic, payload, qos, retain)
        elif self._flush_at is None or at < self._flush_at:
            self._flush_at = at
            self.loop.timers.at(at, self._flush_due)

    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None:
        raise OSError("an event-loop link is not polled")

    def close(self) -> None:
        """DISCONNECT (no last will); the loop writes it and paho closes the socket."""
        client = self._client
        if client is not None and self._live:
            # what waits for its link delay goes out before the DISCONNECT
            with contextlib.suppress(OSError):
                for item in self.sendq.pop_due(float("inf")):
                    self._send(item.topic, item.payload, item.qos, item.retain)
        self._live = False
        self.sendq.clear()
        if client is None:
            return
        with contextlib.suppress(Exception):
            client.disconnect()
        self._after_io()
        if not client.want_write():
            self._drop()

    def abort(self) -> None:
        """Cut the TCP link without DISCONNECT, as a crash does: the will fires."""
        client = self._client
        self._live = False
        self.sendq.clear()
        if client is not None:
            sock = client.socket()
            if isinstance(sock, socket.socket):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        self._drop()

    # -- compute --

    def hold(self, seconds: float) -> None:
        """The sensor computes for ``seconds`` more: nothing is sent until then."""
        self.sendq.hold(self.loop.now() + max(0.0, seconds))

    def busy(self) -> bool:
        return self.sendq.busy(self.loop.now())

    # -- driven by the loop --

    def on_readable(self) -> None:
        """Read what the socket holds (up to READS_PER_EVENT packets).

        ``arrived_by`` is when what ``on_message`` gets had surely arrived: the
        select's time for the first packet, which made the socket readable;
        the time of reading for each further one, which may have come since.
        """
        for n in range(READS_PER_EVENT):
            client = self._client
            if client is None:
                return
            self.arrived_by = self.loop.selected_at if n == 0 else self.loop.now()
            rc = client.loop_read()
            self._hand_over(client)
            if rc != mqtt.MQTT_ERR_SUCCESS:
                self._broken(f"read: {mqtt.error_string(rc)}")
                return
            if self._client is not client or not _has_more(client.socket()):
                break
        self._after_io()

    def on_writable(self) -> None:
        client = self._client
        if client is None:
            return
        rc = client.loop_write()
        if rc != mqtt.MQTT_ERR_SUCCESS and self._client is not None:
            self._broken(f"write: {mqtt.error_string(rc)}")
            return
        self._after_io()

    def misc(self) -> None:
        client = self._client
        if client is not None and client.loop_misc() != mqtt.MQTT_ERR_SUCCESS:
            self._broken("keepalive")

    # -- internals --

    def _live_client(self) -> mqtt.Client:
        if self._client is None or not self._live:
            raise OSError("not connected")
        return self._client

    def _send(self, topic: str, payload: bytes, qos: int, retain: bool) -> None:
        client = self._live_client()
        if self.meter is not None:
            self.meter.sent(payload, self.loop.now())
        info = client.publish(topic, bytes(payload), qos=qos, retain=retain)
        if info.rc not in (mqtt.MQTT_ERR_SUCCESS, mqtt.MQTT_ERR_QUEUE_SIZE):
            self._live = False
            raise OSError(f"publish failed: {mqtt.error_string(info.rc)}")
        self._after_io()

    def _hand_over(self, client: mqtt.Client) -> None:
        """Give on_message what the last read received, outside paho's callback.

        paho runs its callbacks holding a lock that is not reentrant and that
        its DISCONNECT write takes again (on_disconnect): a handler that closes
        the link from inside on_message would block the loop for good.
        """
        got = self._got
        while got:
            if self._client is not client or not self._live:
                got.clear()  # the link broke or was closed: the rest is stale
                return
            topic, payload = got.popleft()
            if self.meter is not None:
                self.meter.received(payload, self.arrived_by)
            self.on_message(topic, payload)

    def _flush_due(self) -> None:
        self._flush_at = None
        if not self.connected:
            return
        try:
            for item in self.sendq.pop_due(self.loop.now()):
                self._send(item.topic, item.payload, item.qos, item.retain)
        except OSError as exc:
            self._broken(str(exc))
            return
        if self.sendq.items:
            self._flush_at = self.sendq.items[0].at
            self.loop.timers.at(self._flush_at, self._flush_due)

    def _after_io(self) -> None:
        """Write now what paho queued; watch for writability while more waits."""
        client = self._client
        if client is None:
            return
        if client.want_write():
            client.loop_write()
        client = self._client  # a DISCONNECT written closes the client
        if client is None:
            return
        want = client.want_write()
        if want != self._writing and self._fd >= 0:
            self._writing = want
            self.loop.set_write_interest(self, self._fd, want)

    def _broken(self, why: str) -> None:
        was_live = self._live
        self._drop()
        if was_live:
            log.debug("%s: link lost (%s)", self.name, why)
            self.on_lost()

    def _drop(self) -> None:
        client, self._client = self._client, None
        self._got.clear()
        self._live = False
        self._writing = False
        if self._fd >= 0:
            self.loop.remove(self, self._fd)
            self._fd = -1
        if client is not None:
            with contextlib.suppress(Exception):
                client._sock_close()  # no public API closes without DISCONNECT

    # -- paho callbacks (inside loop_read/loop_write) --

    def _on_connect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if reason.is_failure:
            log.warning("%s: broker refused the connection: %s", self.name, reason)
            self._broken("refused")
        else:
            self.connects += 1

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        if client is self._client:
            self._broken(f"disconnect: {reason}")

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        if client is self._client:
            self._got.append((msg.topic, bytes(msg.payload)))
