"""The one protocol through which actions of the core are carried out.

The MQTT runtime (``edgeps.runtime.coordinator``) and the simulator
(``edgeps.sim.simulator``) both implement ``ActionSink``; ``carry_out`` hands
each action to the ``on_*`` method for its type, in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from edgeps.core.types import Action, Applied, Held, Rejected, Release, WorkerLeft


class ActionSink(Protocol):
    """Carries out the core's actions: one method per action type."""

    def on_release(self, action: Release) -> None:
        """Send ``action.params`` to each worker named in it."""

    def on_applied(self, action: Applied) -> None:
        """A push was applied (count it, note when)."""

    def on_rejected(self, action: Rejected) -> None:
        """A push or a join was refused (count it, tell the worker)."""

    def on_held(self, action: Held) -> None:
        """A worker waits at the barrier (nothing is sent)."""

    def on_left(self, action: WorkerLeft) -> None:
        """A worker left the live set."""


def carry_out(actions: Iterable[Action], sink: ActionSink) -> None:
    """Hand every action to ``sink``, in the order the core returned them."""
    for action in actions:
        if isinstance(action, Release):
            sink.on_release(action)
        elif isinstance(action, Applied):
            sink.on_applied(action)
        elif isinstance(action, Rejected):
            sink.on_rejected(action)
        elif isinstance(action, Held):
            sink.on_held(action)
        elif isinstance(action, WorkerLeft):
            sink.on_left(action)
        else:
            raise TypeError(f"not a core action: {type(action).__name__}")
