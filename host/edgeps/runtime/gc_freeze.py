"""When serve moves its long-lived objects out of the cyclic collector's way.

CPython's gen-2 collection walks every tracked object. Serve holds a few
records per worker (core state, monitor, peer, accounting) that live as long as
the job, and every gen-2 pass stops the loop while updates pile up in the inbox
(host/BENCHMARKS.md, "Scale benchmark"). ``gc.freeze()`` moves all objects
tracked so far into a permanent generation that later collections skip; objects
created afterwards are collected as before, and any object is still freed by
its reference count when the last reference goes.

`GcFreeze` freezes once at start-up (after one full collection, so start-up
garbage is not kept) and again when a wave of joins has settled: at least
``min_joins`` joins since the last freeze and none for ``quiet`` seconds.
It never collects then (a full pass is the pause this avoids), so cyclic
garbage still in the young generations at that moment is kept for good: a
few objects per freeze, and freezes happen only after join waves.
"""

from __future__ import annotations

import gc
from collections.abc import Callable


class GcFreeze:
    """Decides when to call ``freeze``; the clock comes in as ``now``."""

    def __init__(
        self,
        *,
        enabled: bool = True,
        min_joins: int = 32,
        quiet: float = 1.0,
        freeze: Callable[[], None] = gc.freeze,
        collect: Callable[[], object] = gc.collect,
    ) -> None:
        if min_joins < 1 or quiet < 0:
            raise ValueError("min_joins >= 1 and quiet >= 0 required")
        self.min_joins = min_joins
        self.quiet = quiet
        self._freeze = freeze if enabled else _nothing
        self._collect = collect if enabled else _nothing
        self.pending = 0  # joins since the last freeze
        self.last_join: float | None = None
        self.freezes = 0

    def start(self) -> None:
        """Start-up is over: collect its garbage once, freeze what remains."""
        self._collect()
        self._freeze()
        self.freezes += 1

    def joined(self, now: float) -> None:
        self.pending += 1
        self.last_join = now

    def tick(self, now: float) -> bool:
        """Freeze if a wave of joins has settled; True if it froze."""
        last = self.last_join
        if self.pending < self.min_joins or last is None or now - last < self.quiet:
            return False
        self._freeze()
        self.freezes += 1
        self.pending = 0
        return True


def _nothing() -> None:
    """A disabled freeze (``enabled=False``): the collector runs as CPython's."""
