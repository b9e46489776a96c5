"""A slow link as pure logic: token bucket, one-way delay, TCP-style loss; time given.

``LinkPipe`` is one direction of one link. Bytes entering at ``now`` are cut
into TCP segments of at most ``mss`` bytes; each segment leaves when a token
bucket of ``rate`` bytes/s (``burst`` bytes deep) has room for it and arrives
``delay`` seconds later. TCP never loses bytes, so a lost segment (each with
probability ``loss``) is not dropped: it arrives one retransmission timeout
late (``rto_min + 2 * delay``, Linux's 200 ms floor plus a round trip), and
the segments behind it wait for it, as TCP's in-order delivery makes them.
Not modelled: congestion windows, slow start, delayed ACKs, the bandwidth
the reverse direction's ACKs use, jitter.

The emulator's shaping proxy (``edgeps.netem.shaper``) and the simulator
use this same class, so both price a message the same way.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

MSS = 1448  # TCP payload per segment on Ethernet with timestamps
RTO_MIN = 0.2  # Linux's minimum retransmission timeout, seconds


@dataclass(frozen=True)
class LinkShape:
    """One direction of a link: rate in bits/s (0: unlimited), one-way delay, loss."""

    rate: float = 0.0
    delay: float = 0.0
    loss: float = 0.0
    mss: int = MSS
    rto_min: float = RTO_MIN

    def __post_init__(self) -> None:
        for name in ("rate", "delay", "rto_min"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value!r}")
        if not isinstance(self.loss, int | float) or not 0.0 <= self.loss < 1.0:
            raise ValueError(f"loss must be in [0, 1), got {self.loss!r}")
        if not isinstance(self.mss, int) or self.mss < 1:
            raise ValueError(f"mss must be an int >= 1, got {self.mss!r}")

    @property
    def is_perfect(self) -> bool:
        return self.rate == 0 and self.delay == 0 and self.loss == 0

    @property
    def retransmit_cost(self) -> float:
        """Extra seconds a lost segment costs: one RTO, at least a round trip."""
        return self.rto_min + 2 * self.delay


class TokenBucket:
    """``rate`` bytes/s, ``burst`` bytes at once; ``take`` says when bytes have left.

    Taking more than the bucket holds goes into debt, so a big write leaves at
    the rate rather than being refused: the bucket serialises a queue.
    """

    def __init__(self, rate: float, burst: float) -> None:
        if not rate > 0 or not math.isfinite(rate):
            raise ValueError(f"rate must be a finite number > 0, got {rate!r}")
        if not burst > 0:
            raise ValueError(f"burst must be > 0, got {burst!r}")
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = float(burst)
        self.t = -math.inf

    def take(self, nbytes: int, now: float) -> float:
        """Reserve ``nbytes`` at ``now``; the time their last byte has left."""
        if nbytes < 0:
            raise ValueError("nbytes must be >= 0")
        if now > self.t:
            if self.t == -math.inf:
                self.tokens = self.burst
            else:
                self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
            self.t = now
        self.tokens -= nbytes
        if self.tokens >= 0:
            return self.t
        return self.t + (-self.tokens) / self.rate


@dataclass
class PipeStats:
    bytes: int = 0
    segments: int = 0
    lost: int = 0  # segments that paid a retransmission timeout


class LinkPipe:
    """One direction of a link: ``send(now, n)`` -> [(arrival, bytes)] per segment.

    ``random`` draws in [0, 1) for loss (a seeded ``random.Random().random``
    or a numpy generator's ``random``), so runs repeat.
    """

    def __init__(self, shape: LinkShape, random: Callable[[], float]) -> None:
        self.shape = shape
        self._random = random
        burst = float(shape.mss)
        self.bucket = TokenBucket(shape.rate / 8.0, burst) if shape.rate > 0 else None
        self.last_arrival = -math.inf
        self.stats = PipeStats()

    def send(self, now: float, nbytes: int) -> list[tuple[float, int]]:
        """Schedule ``nbytes`` entering the link at ``now``; in-order arrivals."""
        shape = self.shape
        out = []
        left = nbytes
        while left > 0:
            size = min(shape.mss, left)
            left -= size
            leave = self.bucket.take(size, now) if self.bucket is not None else now
            arrive = leave + shape.delay
            if shape.loss > 0 and self._random() < shape.loss:
                arrive += shape.retransmit_cost
                self.stats.lost += 1
            arrive = max(arrive, self.last_arrival)  # in order, like TCP
            self.last_arrival = arrive
            self.stats.segments += 1
            out.append((arrive, size))
        self.stats.bytes += nbytes
        return out

    def arrival(self, now: float, nbytes: int) -> float:
        """When the last of ``nbytes`` sent at ``now`` arrives (``now`` if none)."""
        segments = self.send(now, nbytes)
        return segments[-1][0] if segments else max(now, self.last_arrival)
