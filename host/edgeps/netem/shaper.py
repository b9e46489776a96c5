"""A shaping TCP proxy on 127.0.0.1: emulated sensors' real MQTT bytes on a slow link.

One asyncio loop in one thread serves every sensor. ``add(name, up, down)``
opens a listening port for one sensor; each connection to it is joined to
the broker, and the bytes of each direction go through that sensor's own
``LinkPipe`` (token bucket, one-way delay, TCP-style loss with a
retransmission timeout; see ``edgeps.netem.shaping``). The pipes belong
to the sensor, not the connection, so a reconnect does not refill the
bucket. Whatever the client library, what is shaped is what it writes.

A closed or reset side closes the other after the bytes already in flight
are delivered, without an MQTT DISCONNECT, so a crash still fires the
sensor's last will at the broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgeps.netem.shaping import LinkPipe, LinkShape

log = logging.getLogger("edgeps.netem.shaper")

READ_SIZE = 1 << 16
QUEUE_SEGMENTS = 64  # in flight per direction before the proxy stops reading


@dataclass
class ProxyLink:
    """One sensor's two directions and what crossed them."""

    name: str
    up: LinkPipe  # sensor -> broker
    down: LinkPipe  # broker -> sensor
    port: int = 0
    connections: int = 0
    errors: int = 0
    server: Any = None
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def stats(self) -> dict[str, int]:
        return {
            "bytes_up": self.up.stats.bytes,
            "bytes_down": self.down.stats.bytes,
            "lost_segments_up": self.up.stats.lost,
            "lost_segments_down": self.down.stats.lost,
            "connections": self.connections,
        }


class ShapingProxy:
    """Proxy sensors to ``host:port`` through shaped links: start(), add(), close()."""

    def __init__(self, host: str, port: int, *, seed: int = 0) -> None:
        self.host = host
        self.port = port
        self.seed = seed
        self.links: dict[str, ProxyLink] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> ShapingProxy:
        if self._thread is not None:
            raise RuntimeError("proxy already started")
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(
            target=loop.run_forever, name="shaping-proxy", daemon=True
        )
        self._thread.start()
        return self

    def _call(self, coro: Any, timeout: float = 10.0) -> Any:
        if self._loop is None:
            raise RuntimeError("proxy not started")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def add(self, name: str, up: LinkShape, down: LinkShape) -> int:
        """Open a 127.0.0.1 port for sensor ``name``; returns the port."""
        with self._lock:
            if name in self.links:
                raise ValueError(f"proxied link {name!r} exists")
            index = len(self.links)
        rng_up = random.Random(self.seed * 7919 + 2 * index)
        rng_down = random.Random(self.seed * 7919 + 2 * index + 1)
        pipes = LinkPipe(up, rng_up.random), LinkPipe(down, rng_down.random)
        link = ProxyLink(name, *pipes)
        port: int = self._call(self._listen(link))
        with self._lock:
            self.links[name] = link
        return port

    def stats(self, name: str) -> dict[str, int]:
        with self._lock:
            return self.links[name].stats()

    def close(self, timeout: float = 5.0) -> None:
        """Close every port and connection and end the loop's thread."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            self._call(self._shutdown(), timeout)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)
        if not thread.is_alive():
            loop.close()
        self._loop = None

    # -- inside the loop --

    async def _listen(self, link: ProxyLink) -> int:
        async def accept(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            # cancelled by close(): the connection's end, not an error to report
            with contextlib.suppress(asyncio.CancelledError):
                await self._connection(link, r, w)

        link.server = await asyncio.start_server(accept, "127.0.0.1", 0)
        link.port = int(link.server.sockets[0].getsockname()[1])
        return link.port

    async def _shutdown(self) -> None:
        for link in list(self.links.values()):
            if link.server is not None:
                link.server.close()
            for task in list(link.tasks):
                task.cancel()
        for link in list(self.links.values()):
            if link.tasks:
                await asyncio.gather(*link.tasks, return_exceptions=True)

    async def _connection(
        self,
        link: ProxyLink,
        sensor_r: asyncio.StreamReader,
        sensor_w: asyncio.StreamWriter,
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            link.tasks.add(task)
        link.connections += 1
        try:
            try:
                broker_r, broker_w = await asyncio.open_connection(self.host, self.port)
            except OSError as exc:
                link.errors += 1
                log.info("proxy %s: broker unreachable: %s", link.name, exc)
                return
            up = asyncio.ensure_future(self._pump(link.up, sensor_r, broker_w))
            down = asyncio.ensure_future(self._pump(link.down, broker_r, sensor_w))
            try:
                await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                # one side ended: the other stops too (a TCP proxy cannot half-live)
                for t in (up, down):
                    t.cancel()
                await asyncio.gather(up, down, return_exceptions=True)
                _close(broker_w)
        finally:
            _close(sensor_w)
            if task is not None:
                link.tasks.discard(task)

    async def _pump(
        self, pipe: LinkPipe, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Read, schedule through the pipe, write each segment at its arrival time."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue(QUEUE_SEGMENTS)
        deliver = asyncio.ensure_future(_deliver(queue, writer, loop.time))
        try:
            while True:
                try:
                    data = await reader.read(READ_SIZE)
                except (ConnectionError, OSError):
                    data = b""
                if not data:
                    await queue.put(None)
                    break
                offset = 0
                for at, size in pipe.send(loop.time(), len(data)):
                    await queue.put((at, data[offset : offset + size]))
                    offset += size
            await deliver  # what is in flight still arrives, then the side closes
        finally:
            deliver.cancel()
            await asyncio.gather(deliver, return_exceptions=True)


async def _deliver(
    queue: asyncio.Queue[tuple[float, bytes] | None],
    writer: asyncio.StreamWriter,
    clock: Callable[[], float],
) -> None:
    while True:
        item = await queue.get()
        if item is None:
            return
        at, chunk = item
        wait = at - clock()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            writer.write(chunk)
            await writer.drain()
        except (ConnectionError, OSError):
            return


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        writer.close()
