"""One turn of a paho client's network thread, on paho's external-loop API.

``client.loop()`` makes paho open a socket pair and write one byte to it for
every packet queued from any thread (each PUBACK it owes, each publish), so
that its select() wakes: at 1,000 updates a second that is a send, a wake, a
select and a recv per packet, on top of the packet's own send. `Pump` drives
the same client with ``loop_read``/``loop_write``/``loop_misc`` instead (what
paho documents for running select() yourself) and owns the wake-up: paho
calls ``on_socket_register_write`` once when its outgoing queue stops being
empty, and `Pump.wake` then writes one byte only if the caller is another
thread (the network thread writes what it queued in the same turn). A burst
of publishes costs one wake, not one per packet.

What a turn does is what ``client.loop()`` does, in the same order: wait
(bounded) for the socket to be readable or writable or for a wake, read what
came, write what is queued, then keepalive (``loop_misc``); its return code
is the one ``loop()`` would return, so a lost link ends the turn the same way.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
import time
from typing import Any

import paho.mqtt.client as mqtt

MISC_PERIOD = 0.05  # seconds between keepalive checks (loop() checked every turn)


class Pump:
    """The network thread's select loop over one client (one thread turns it)."""

    def __init__(self) -> None:
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._owner: int | None = None  # the thread that turns
        self._next_misc = 0.0
        self.wakes = 0  # bytes written to wake the network thread

    def wake(self, client: Any = None, userdata: Any = None, sock: Any = None) -> None:
        """``on_socket_register_write``: wake the network thread from another."""
        if threading.get_ident() == self._owner:
            return  # it writes at the end of this turn
        with contextlib.suppress(OSError):  # full (a wake is pending) or closed
            self._wake_w.send(b"\0")
            self.wakes += 1

    def turn(self, client: mqtt.Client, timeout: float) -> int:
        """One turn of the network thread; an MQTT error code as ``loop()``'s."""
        self._owner = threading.get_ident()
        sock = client.socket()
        if sock is None:
            return int(mqtt.MQTT_ERR_NO_CONN)
        pending = sock.pending() if hasattr(sock, "pending") else 0  # TLS
        wlist = [sock] if client.want_write() else []
        try:
            ready, _, _ = select.select(
                [sock, self._wake_r], wlist, [], 0.0 if pending else timeout
            )
        except (TypeError, ValueError, OSError):
            return int(mqtt.MQTT_ERR_CONN_LOST)
        if self._wake_r in ready:
            with contextlib.suppress(OSError):
                self._wake_r.recv(4096)
        if sock in ready or pending:
            rc = client.loop_read()
            if rc or client.socket() is None:
                return int(rc)
        if client.want_write():
            rc = client.loop_write()
            if rc or client.socket() is None:
                return int(rc)
        now = time.monotonic()
        if now < self._next_misc:
            return int(mqtt.MQTT_ERR_SUCCESS)
        self._next_misc = now + MISC_PERIOD
        return int(client.loop_misc())

    def close(self) -> None:
        for s in (self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                s.close()
