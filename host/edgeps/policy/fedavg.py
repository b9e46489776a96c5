"""Federated averaging: synchronous rounds, one sample-weighted mean step each."""

from __future__ import annotations

import math

import numpy as np

from edgeps.core.types import Push
from edgeps.core.view import ClusterView
from edgeps.policy.kofn import KofN
from edgeps.policy.robust import DEFAULT_RULE, combine, parse_rule


class FedAvg(KofN):
    """FedAvg (McMahan et al., "Communication-Efficient Learning of Deep
    Networks from Decentralized Data", AISTATS 2017) over the PS's rounds.

    Rule: a round closes when every live worker pushed for it, or, with
    ``k``, when the first K of them did, or, with ``deadline``, ``deadline``
    seconds after the round's first release once at least one push is in.
    The round's deltas are combined into one step, their mean weighted by
    each push's samples (sum n_i d_i / sum n_i; a push that counts no
    samples weighs one), applied by the server optimizer at the server lr: the
    step is an average, so more workers never make it larger. Then every
    waiting worker is released into the next round. A push for a closed
    round (a straggler past K or the deadline) is dropped ("too_stale") and
    its worker resynced, as FedAvg drops late clients. Rounds are K-of-N's
    (``edgeps.policy.kofn``) with cap 0. Bound: every applied push was
    computed on the round's parameters (lag 0).

    ``agg``: how the round's deltas are combined (``edgeps.policy.robust``):
    the Byzantine-robust ``trim:0.25`` (the default) or ``median``, or
    ``mean`` (the above, McMahan's rule, with each claimed sample count
    capped by the core).
    With gradients (one local step) a round is a BSP round (``k``: a K-of-N
    round) whose gradients are combined, so ``fedavg:agg=median`` is BSP with
    a robust combination and ``fedavg:k=K,agg=median`` is K-of-N with one.
    """

    name = "fedavg"
    aggregates = True

    def __init__(
        self,
        k: int | None = None,
        *,
        deadline: float | None = None,
        agg: str = DEFAULT_RULE,
    ) -> None:
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"fedavg k must be an int >= 1, got {k!r}")
        if deadline is not None and not (math.isfinite(deadline) and deadline > 0):
            raise ValueError(f"fedavg deadline must be > 0 seconds, got {deadline!r}")
        super().__init__(1 if k is None else k, cap=0)
        self.want = k
        self.deadline = None if deadline is None else float(deadline)
        self.opened: float | None = None  # the round's first release
        self.agg = agg
        self._rule, self._frac = parse_rule(agg)
        self._deltas: list[np.ndarray] = []  # this round's, clipped by the core
        self._weights: list[float] = []
        self._of_round = 0  # the round the sum is of

    @property
    def bound_description(self) -> str:
        k = "every live worker" if self.want is None else f"the first {self.want}"
        rule = "mean" if self._rule == "mean" else self.agg
        return f"one {rule} step per round of {k}; an applied push lags 0 rounds"

    def k_effective(self, view: ClusterView, now: float | None = None) -> int:
        n_live = view.n_live
        return n_live if self.want is None else max(1, min(self.want, n_live))

    def _close_round(self, view: ClusterView, now: float) -> None:
        if not self._pushed:
            return
        opened, deadline = self.opened, self.deadline
        due = opened is not None and deadline is not None and now >= opened + deadline
        if due or len(self._pushed) >= self.k_effective(view, now):
            self.round += 1
            self._pushed.clear()
            self._late.clear()

    def collect(
        self, view: ClusterView, push: Push, delta: np.ndarray, staleness: int
    ) -> None:
        self._deltas.append(np.array(delta, np.float32, copy=True))
        # a push that counts no samples weighs one
        self._weights.append(float(max(1, int(push.samples))))
        self._of_round = self.round

    def aggregate(self, view: ClusterView, now: float) -> np.ndarray | None:
        self._close_round(view, now)
        if not self._deltas or self._of_round >= self.round:
            return None
        self.opened = None
        step = combine(self._deltas, self._weights, self._rule, self._frac)
        self._deltas, self._weights = [], []
        return step

    def on_released(self, view: ClusterView, worker_id: str, now: float) -> None:
        if self.opened is None:
            self.opened = now
        super().on_released(view, worker_id, now)

    def describe(self) -> str:
        opts = [] if self.want is None else [f"k={self.want}"]
        opts += [] if self.deadline is None else [f"deadline={self.deadline:g}"]
        opts += [] if self.agg == DEFAULT_RULE else [f"agg={self.agg}"]
        return "fedavg" + (":" + ",".join(opts) if opts else "")
