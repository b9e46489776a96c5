"""The job's retained MODEL stays the PS's own: another one is replaced at once.

MODEL is unsigned (workers read it only to pick the model and to notice a
new run), so anyone on a broker without ACLs can retain another one, e.g. a
MODEL ``done`` that would keep new workers from joining. Serve subscribes to
its own MODEL topic; whatever arrives there that is not one of its own last
publications is counted and answered by publishing its own again, at most
once per ``min_gap`` seconds (two serves of one job on one broker must not
ping-pong at broker speed: the later republish waits for ``due``).
"""

from __future__ import annotations

from collections import deque


class ModelGuard:
    """Decides when the PS republishes its retained MODEL."""

    def __init__(self, *, min_gap: float = 0.5) -> None:
        self.min_gap = float(min_gap)
        self.own: deque[bytes] = deque(maxlen=4)  # our recent MODEL payloads
        self.replaced = 0  # foreign MODELs heard on the job's topic
        self.pending = False  # a republish waits for the gap
        self._last = float("-inf")  # the last republish over another MODEL

    @property
    def current(self) -> bytes | None:
        """The MODEL payload the PS published last (None: none yet)."""
        return self.own[-1] if self.own else None

    def published(self, payload: bytes) -> None:
        """The PS published ``payload`` as its retained MODEL."""
        self.own.append(bytes(payload))
        self.pending = False

    def restored(self, payload: bytes, now: float) -> None:
        """The PS republished its own MODEL over another one at ``now``."""
        self.published(payload)
        self._last = now

    def heard(self, payload: bytes, now: float) -> bool:
        """A retained MODEL arrived; True when the PS must republish now."""
        if self.current is None or bytes(payload) in self.own:
            return False  # before our first MODEL, or our own echo
        self.replaced += 1
        self.pending = True
        return self.due(now)

    def due(self, now: float) -> bool:
        """True when a republish is pending and the gap has passed."""
        return self.pending and now - self._last >= self.min_gap
