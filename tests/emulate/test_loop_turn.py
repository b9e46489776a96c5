"""One turn of the loop emulator over real sockets (a fake clock, a real broker)."""

from __future__ import annotations

import socket
import threading
import time

import paho.mqtt.client as mqtt
from edgeps.emulate.loop import TIMERS_EVERY, EventLoop, LoopLink, _has_more
from edgeps.transport.options import ConnectionOptions
from paho.mqtt.enums import CallbackAPIVersion


class Clock:
    """Time that moves only when a handler says it took some."""

    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class BusySensor:
    """A readable socket whose handling takes 1 ms of the fake clock."""

    def __init__(self, sock: socket.socket, clock: Clock, seen: list[str]) -> None:
        self.sock, self.clock, self.seen = sock, clock, seen

    def on_readable(self) -> None:
        self.sock.recv(16)
        self.clock.t += 0.001
        self.seen.append("sensor")

    def misc(self) -> None:
        """Keepalive pass: nothing to keep alive here."""


def test_timers_due_during_a_long_turn_run_within_it_not_at_its_end() -> None:
    # Prepare: twice TIMERS_EVERY readable sockets, a timer due 5 ms in
    clock = Clock()
    loop = EventLoop(clock)
    seen: list[str] = []
    pairs = [socket.socketpair() for _ in range(2 * TIMERS_EVERY)]
    try:
        for a, b in pairs:
            a.send(b"x")
            loop.add(BusySensor(b, clock, seen), b.fileno())  # type: ignore[arg-type]
        loop.timers.at(100.005, lambda: seen.append("timer"))

        # Execute
        loop.turn(clock())

        # Assert: it ran after the first TIMERS_EVERY sockets, before the rest
        assert seen.count("sensor") == 2 * TIMERS_EVERY
        assert seen.index("timer") == TIMERS_EVERY
        assert loop.selected_at == 100.0  # what the select found had arrived by then
    finally:
        loop.close()
        for a, b in pairs:
            a.close()
            b.close()


def test_has_more_peeks_without_taking_and_never_blocks() -> None:
    a, b = socket.socketpair()
    try:
        b.setblocking(False)
        assert _has_more(b) is False  # nothing yet, and no wait for it

        a.send(b"xy")

        assert _has_more(b) is True
        assert b.recv(16) == b"xy"  # the peek took nothing
        assert _has_more(b) is False
        a.close()
        assert _has_more(b) is False  # end of stream: the next read reports it
        assert _has_more(None) is False
    finally:
        a.close()
        b.close()


def test_one_turn_reads_every_packet_a_sensor_socket_holds(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: three retained messages, delivered together on SUBSCRIBE
    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="turn-pub")
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    infos = [pub.publish(f"t/{n}", n.encode(), qos=1, retain=True) for n in "abc"]
    for info in infos:
        info.wait_for_publish(5)
    pub.loop_stop()
    pub.disconnect()
    loop = EventLoop()
    got: list[tuple[str, float]] = []
    link = LoopLink(
        loop,
        ConnectionOptions(broker=mosquitto.url),
        "s1",
        lambda topic, payload: got.append((topic, link.arrived_by)),
        lambda: None,
    )
    try:
        link.connect()
        for _ in range(50):  # bounded: until the CONNACK is in
            if link.connects:
                break
            loop.turn(loop.now())
        link.subscribe("t/#")
        time.sleep(0.5)  # the SUBACK and the three messages reach the socket

        # Execute
        loop.turn(loop.now())

        # Assert: all three in one turn; the first had arrived by the select,
        # the others by their reading, never before the select
        assert sorted(t for t, _ in got) == ["t/a", "t/b", "t/c"]
        assert all(at >= loop.selected_at for _, at in got)
    finally:
        link.close()
        loop.turn(loop.now())
        loop.close()


def test_a_handler_that_closes_its_link_on_a_message_does_not_hang_the_loop(  # type: ignore[no-untyped-def]
    mosquitto,
) -> None:
    # Prepare: a retained message, and a link that leaves (DISCONNECT) from
    # its message handler, as a sensor does on the STOP that ends its worker
    pub = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="close-pub")
    pub.connect("127.0.0.1", mosquitto.port)
    pub.loop_start()
    pub.publish("t/stop", b"stop", qos=1, retain=True).wait_for_publish(5)
    pub.loop_stop()
    pub.disconnect()
    loop = EventLoop()
    got: list[str] = []

    def leave(topic: str, payload: bytes) -> None:
        got.append(topic)
        link.close()

    link = LoopLink(
        loop, ConnectionOptions(broker=mosquitto.url), "s1", leave, lambda: None
    )
    link.connect()
    for _ in range(50):  # bounded: until the CONNACK is in
        if link.connects:
            break
        loop.turn(loop.now())
    link.subscribe("t/#")

    def turns() -> None:
        for _ in range(50):  # bounded: until the link is gone
            if not loop.n_links:
                return
            loop.turn(loop.now())

    # Execute: the loop runs in a thread, which a deadlock would keep alive
    runner = threading.Thread(target=turns, daemon=True)
    runner.start()
    runner.join(30)

    # Assert: the message was handled, the link closed and the loop went on
    try:
        assert not runner.is_alive()
        assert got == ["t/stop"]
        assert loop.n_links == 0 and not link.connected
    finally:
        if not runner.is_alive():
            loop.close()
