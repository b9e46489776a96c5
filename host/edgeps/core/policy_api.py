"""The sync-policy interface: what the PS core calls, defined by the core.

Dependency rule: ``edgeps.core`` imports no module of ``edgeps.policy``, the
runtime or the transport. Policies (``edgeps.policy.*``) subclass ``Policy``
from here and read the cluster through ``edgeps.core.view.ClusterView``; the
core is handed a ``Policy`` object, and the text forms ("ssp:3") are parsed
at the edges (CLI, config, simulator) by ``edgeps.policy.parse_policy``.

A policy answers two questions for the core: may this push be applied
(``admit``), and may this waiting worker start its next iteration now
(``may_proceed``). After every event the core releases every waiting worker
that may proceed, so a policy never has to remember whom to wake.

Aggregation. A policy that sets ``aggregates`` (FedAvg, FedBuff, FedAsync)
gets each admitted push's update from the core as a delta (a gradient pushed
alone becomes lr x gradient, one local step), clipped, through ``collect``,
and the core applies nothing until ``aggregate`` returns a pseudo-gradient:
before every release pass it asks, and applies what it gets as one version,
by the server optimizer at the server lr. The policy owns the weights
(samples, staleness) and the buffer; the core owns the parameters. The
per-push scalings (``staleness_aware``, ``lr_workers``, the balancer,
``step_scale``) do not apply to aggregates; clipping and the divergence
backoff do.

Cost at scale. A policy whose rule reads "proceed iff my key <= a limit"
sets ``keyed_release`` and gives ``release_key`` (fixed while the worker
waits) and ``release_limit``; the core then keeps the waiting workers in a
heap by key and asks ``may_proceed`` only for those at or below the limit
(``edgeps.core.release``), so a push costs O(log N), not O(N). Without a key
the core asks ``may_proceed`` for every waiting worker.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from edgeps.core.types import Push
from edgeps.core.view import ClusterView


class Policy(ABC):
    """Base of every sync policy: one rule, one bound, hooks the core calls.

    ``bound`` is the policy's staleness bound in its own units (None if it has
    none) and ``measure(view)`` the current value of that quantity; the core's
    tests check ``measure(view) <= bound`` after every event.
    """

    name: str = "policy"

    @property
    @abstractmethod
    def bound_description(self) -> str:
        """Human-readable statement of the bound this policy keeps."""

    @property
    def bound(self) -> float | None:
        return None

    def measure(self, view: ClusterView) -> float:
        """Current value of the bounded quantity (default: live clock spread)."""
        return float(view.max_live_clock() - view.min_live_clock())

    def admit(self, view: ClusterView, push: Push, now: float) -> str | None:
        """A reason to drop this push (e.g. "too_stale"), or None to apply it."""
        return None

    @abstractmethod
    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        """May this waiting worker start its next iteration now?"""

    keyed_release: bool = False

    #: True when a release waits for a whole round (every live worker, or
    #: K of them), so a straggler's first pushes set everyone's pace: BSP,
    #: K-of-N. The balancer then assigns batches from a board's first push
    #: (``Balancer.for_policy``). Other policies get its warm-up mode: ASP and
    #: DSP never wait for a straggler's first pushes, and under SSP and DSSP
    #: an early small batch is pushed far more often by a board nobody waits
    #: for (eager was slower for them in the policy matrix).
    waits_for_rounds: bool = False

    def release_key(self, view: ClusterView, worker_id: str) -> float:
        """The key of a worker that starts waiting (only with ``keyed_release``).

        It must not change while the worker waits, and ``may_proceed`` must
        be True exactly when key <= ``release_limit``.
        """
        raise NotImplementedError

    def release_limit(self, view: ClusterView, now: float) -> float:
        """The limit of this release pass (after ``refresh``)."""
        raise NotImplementedError

    def step_scale(self, view: ClusterView, push: Push, staleness: int) -> float:
        """Share of the step this admitted push gets (1.0: the plain step)."""
        return 1.0

    #: True: the core hands updates to ``collect`` and applies ``aggregate``'s
    aggregates: bool = False

    def collect(
        self, view: ClusterView, push: Push, delta: np.ndarray, staleness: int
    ) -> None:
        """Take this push's ``delta`` (only with ``aggregates``; a read-only view).

        ``staleness`` is the version now minus the push's base version; a
        version counts the aggregates applied.
        """
        raise NotImplementedError

    def aggregate(self, view: ClusterView, now: float) -> np.ndarray | None:
        """The pseudo-gradient to apply now as one step, or None (``aggregates``)."""
        return None

    def on_applied(self, view: ClusterView, push: Push, now: float) -> None:
        """Called after a push is applied and the pusher's clock advanced."""
        return None

    def on_left(self, view: ClusterView, worker_id: str, now: float) -> None:
        """Called after a worker left the live set (bye, last will, timeout)."""
        return None

    def on_joined(self, view: ClusterView, worker_id: str, now: float) -> None:
        """Called after a worker (re)joined, before it is released."""
        return None

    def on_released(self, view: ClusterView, worker_id: str, now: float) -> None:
        """Called when the core releases a worker (it starts a new iteration)."""
        return None

    def refresh(self, view: ClusterView, now: float) -> None:
        """Called once before each release pass (e.g. to close rounds)."""
        return None

    def describe(self) -> str:
        """Compact text form that ``parse_policy`` accepts."""
        return self.name

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"
