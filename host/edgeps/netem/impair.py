"""Link impairments for emulated sensors: delay, jitter and loss on outgoing publishes.

``ImpairedTransport`` wraps any worker transport. Each outgoing publish waits
``delay`` seconds plus an exponential extra with mean ``jitter`` (the
simulator's link model in edgeps.workloads.scenarios), drawn from a seeded RNG. A QoS1
publish is never lost: each simulated drop costs one retransmission interval
and the message is then sent again and delivered once, late, as on a live
MQTT-over-TCP link where the lost packet is retransmitted until acknowledged
(duplicates only arise across reconnects, which the worker loop handles). A
dropped QoS0 publish is gone. Incoming traffic is unchanged.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol


class WorkerTransport(Protocol):
    """The duck-typed transport the shared worker loop drives."""

    connected: bool

    def connect(self, will_topic: str, will_payload: bytes) -> None: ...
    def subscribe(self, topic: str, qos: int = 1) -> None: ...
    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None: ...
    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class LinkProfile:
    """How a link misbehaves: delay and mean extra jitter (s), loss probability."""

    delay: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0
    retransmit_after: float = (
        0.3  # resend after no PUBACK (the simulator's retry_timeout)
    )
    max_retransmits: int = 50  # keeps a loss near 1 from stalling forever

    def __post_init__(self) -> None:
        for name in ("delay", "jitter", "retransmit_after"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if not isinstance(self.loss, int | float) or not 0.0 <= self.loss < 1.0:
            raise ValueError(f"loss must be in [0, 1), got {self.loss!r}")
        if self.max_retransmits < 0:
            raise ValueError("max_retransmits must be >= 0")

    @property
    def is_perfect(self) -> bool:
        return self.delay == 0 and self.jitter == 0 and self.loss == 0


@dataclass
class LinkStats:
    published: int = 0  # publishes handed to the inner transport
    retransmits: int = 0  # QoS1 drops turned into a resend
    dropped: int = 0  # QoS0 publishes lost for good
    delay_total: float = 0.0  # seconds of added delay, retransmissions included


class ImpairedTransport:
    """Delay, jitter and drop a transport's outgoing publishes with a seeded RNG.

    ``sleep`` is injectable so tests run without waiting and so an emulator can
    cut a long delay short when it stops (e.g. ``stop_event.wait``).
    """

    def __init__(
        self,
        inner: Any,
        link: LinkProfile,
        *,
        seed: int = 0,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        self.inner = inner
        self.link = link
        self.stats = LinkStats()
        self._rng = random.Random(seed)
        self._sleep = sleep
        self._lock = threading.Lock()

    @property
    def connected(self) -> bool:
        return bool(self.inner.connected)

    def connect(self, will_topic: str, will_payload: bytes) -> None:
        self.inner.connect(will_topic, will_payload)

    def subscribe(self, topic: str, qos: int = 1) -> None:
        self.inner.subscribe(topic, qos)

    def plan(self, qos: int) -> tuple[float, int, bool]:
        """Draw (delay seconds, retransmissions, delivered) for one publish."""
        link = self.link
        with self._lock:
            delay = link.delay
            if link.jitter > 0:
                delay += self._rng.expovariate(1.0 / link.jitter)
            retransmits = 0
            if link.loss > 0:
                if qos == 0:
                    if self._rng.random() < link.loss:
                        return delay, 0, False
                else:
                    while (
                        retransmits < link.max_retransmits
                        and self._rng.random() < link.loss
                    ):
                        retransmits += 1
            return delay + retransmits * link.retransmit_after, retransmits, True

    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> None:
        delay, retransmits, delivered = self.plan(qos)
        if delay > 0:
            self._sleep(delay)
        self.stats.delay_total += delay
        self.stats.retransmits += retransmits
        if not delivered:
            self.stats.dropped += 1
            return
        self.inner.publish(topic, payload, qos, retain)
        self.stats.published += 1

    def poll(self, timeout_ms: int) -> tuple[str, bytes] | None:
        result: tuple[str, bytes] | None = self.inner.poll(timeout_ms)
        return result

    def close(self) -> None:
        self.inner.close()

    def abort(self) -> None:
        """Drop the link as a crash would, if the inner transport can."""
        abort = getattr(self.inner, "abort", None)
        if abort is not None:
            abort()
        else:
            self.inner.close()
