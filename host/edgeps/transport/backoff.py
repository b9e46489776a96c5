"""Reconnect backoff for the CPython side: doubling delays, capped, with jitter.

The host link and `edgeps worker`'s wait for the job's MODEL both retry with
it. Jitter spreads the reconnects of many sensors that lost the same broker
at the same moment. (The board worker's loop in `firmware/` has its own,
written for MicroPython.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    """Delays ``initial * factor**k`` up to ``maximum``; `reset` after a success.

    ``jitter`` in [0, 1) shortens each delay by a random fraction up to that
    much, drawn from ``rng`` (seed it for reproducible tests).
    """

    initial: float = 0.25
    maximum: float = 16.0
    factor: float = 2.0
    jitter: float = 0.0
    rng: random.Random = field(default_factory=random.Random, repr=False)
    _next: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError("need 0 < initial <= maximum")
        if self.factor < 1:
            raise ValueError("factor must be >= 1")
        if not 0 <= self.jitter < 1:
            raise ValueError("jitter must be in [0, 1)")
        self._next = self.initial

    def next(self) -> float:
        """The delay to wait now; the one after it grows."""
        delay = self._next
        self._next = min(self.maximum, self._next * self.factor)
        if self.jitter:
            delay *= 1.0 - self.jitter * self.rng.random()
        return delay

    def reset(self) -> None:
        """A connection worked: start again from ``initial``."""
        self._next = self.initial
