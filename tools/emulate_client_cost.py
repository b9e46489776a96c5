"""CPU per QoS1 echo round trip: paho clients on edgeps.emulate.loop vs aiomqtt.

Why the event-loop emulator drives paho's external-loop API itself instead
of aiomqtt (which wraps the same paho client in asyncio). Each of N clients
subscribes to its own topic and publishes K QoS1 messages to it, one at a
time, each after the previous came back through the broker.

    python tools/emulate_client_cost.py paho PORT   # a mosquitto on PORT
    python tools/emulate_client_cost.py aiomqtt PORT  # needs `pip install aiomqtt`
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

N, K = 200, 20
PAYLOAD = b"x" * 200


def paho_loop(port: int) -> tuple[float, float]:
    from edgeps.emulate.loop import EventLoop, LoopLink
    from edgeps.transport.options import ConnectionOptions

    loop = EventLoop()
    opts = ConnectionOptions(broker=f"mqtt://127.0.0.1:{port}")
    done = [0]
    links: list[LoopLink] = []

    def handler(i: int) -> Any:
        left = [K]

        def on_msg(topic: str, payload: bytes) -> None:
            left[0] -= 1
            if left[0] > 0:
                links[i].publish(f"cmp/{i}", PAYLOAD, 1)
            else:
                done[0] += 1

        return on_msg

    for i in range(N):
        link = LoopLink(loop, opts, f"c{i}", handler(i), lambda: None)
        links.append(link)
        link.connect()
        link.subscribe(f"cmp/{i}", 1)
    c0, t0 = time.process_time(), time.monotonic()
    for i, link in enumerate(links):
        link.publish(f"cmp/{i}", PAYLOAD, 1)
    loop.run(lambda: done[0] >= N, time.monotonic() + 60)
    return time.process_time() - c0, time.monotonic() - t0


async def aiomqtt_loop(port: int) -> tuple[float, float]:
    import aiomqtt  # type: ignore[import-not-found]

    clients = []
    for i in range(N):
        c = aiomqtt.Client("127.0.0.1", port, identifier=f"a{i}")
        await c.__aenter__()
        await c.subscribe(f"cmp/{i}", qos=1)
        clients.append(c)

    async def one(i: int, c: Any) -> None:
        it = c.messages.__aiter__()
        for _ in range(K):
            await c.publish(f"cmp/{i}", PAYLOAD, qos=1)
            await it.__anext__()

    c0, t0 = time.process_time(), time.monotonic()
    await asyncio.gather(*(one(i, c) for i, c in enumerate(clients)))
    res = time.process_time() - c0, time.monotonic() - t0
    for c in clients:
        await c.__aexit__(None, None, None)
    return res


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("paho", "aiomqtt"):
        print(__doc__)
        return 2
    port = int(sys.argv[2])
    if sys.argv[1] == "paho":
        cpu, wall = paho_loop(port)
    else:
        cpu, wall = asyncio.run(aiomqtt_loop(port))
    n = N * K
    ms = 1000 * cpu / n
    print(f"{sys.argv[1]}: {n} round trips, {ms:.3f} ms CPU each, {wall:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
