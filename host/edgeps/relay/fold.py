"""One site round: the boards' gradients folded into one update, between two threads.

The site coordinator's thread folds each applied board push into the open
round (`fold`) and closes the round when the site policy releases a board
after at least one fold (`close`). The upstream worker's thread, inside the
relay trainer's ``step()``, hands over the central parameters that just
landed (`offer`) and then waits for the round to close (`wait`), which
returns the sample-weighted mean of the folded gradients and resets the
round. `take_central` gives the coordinator the parameters to fan out.
Pure logic apart from one `threading.Condition`; time is passed in.

Under a central job with local rounds a board pushes a *delta* (``steps`` >
1: released minus trained parameters) instead of a gradient. A round that
holds any delta folds into a delta: each gradient is first made the delta
of one step at the job's ``lr`` (as the core's ``push_delta`` does), and the
deltas' sample-weighted mean goes upstream with ``steps`` the sample-weighted
mean of the boards' steps (a gradient counts one), rounded, at least 2. A
round of gradients alone is their mean, ``steps`` 1, computed as before.

A board that lies must not steer the site's push: each board's claimed
samples count at most ``SAMPLE_CAP`` times the round's lower median claim,
and a round of 4 or more updates is combined by the coordinate-wise trimmed
mean (``edgeps.policy.robust``, ``trim:0.25``: a quarter of the values cut
at each end of every coordinate) instead of the weighted mean; a smaller
round has nothing to cut and stays the (capped) weighted mean.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from edgeps.policy.robust import DEFAULT_RULE, combine, parse_rule

MAX_STEPS = 0xFFFF  # UPDATE's steps is a u16
SAMPLE_CAP = 8.0  # a board's samples weigh at most this x the round's lower median


@dataclass(frozen=True)
class Folded:
    """What one closed round pushes upstream."""

    loss: float  # sample-weighted mean of the boards' losses (NaN if none known)
    samples: int  # total samples of the folded gradients
    grad: np.ndarray  # float32, the sample-weighted mean gradient
    count: int  # gradients (or deltas) folded
    late: int  # of them computed on an earlier fan-out than the latest
    steps: int = 1  # 1: ``grad`` is a gradient; > 1: a delta of that many steps


class Round:
    """The open site round and the latest central parameters, shared by two threads.

    ``wake`` (settable later) is called after `offer`, on the upstream thread,
    to wake the site coordinator so that it fans the parameters out at once.
    """

    def __init__(self, n_params: int, wake: Callable[[], object] | None = None) -> None:
        if n_params < 1:
            raise ValueError("n_params must be >= 1")
        self.n_params = int(n_params)
        self.wake = wake
        self._cond = threading.Condition()
        # the open round's updates: (float32 copy, claimed samples, steps)
        self._updates: list[tuple[np.ndarray, int, int]] = []
        self._deltas = 0  # deltas folded into the open round
        self._rule, self._frac = parse_rule(DEFAULT_RULE)
        self._samples = 0
        self._count = 0
        self._late = 0
        self._loss_sum = 0.0
        self._loss_weight = 0.0
        self._closed = False
        self._central: np.ndarray | None = None
        self._offers = 0
        # totals over the run
        self.rounds = 0
        self.folded = 0
        self.late = 0
        self.largest = 0  # most gradients in one round
        self.delta_rounds = 0  # rounds pushed as a delta (local rounds)

    # ---- the site coordinator's side ------------------------------------

    def fold(
        self, grad: np.ndarray, samples: int, loss: float, late: bool, steps: int = 1
    ) -> None:
        """Add one applied board update, weighted by its samples (1 if it gave 0):
        a gradient (``steps`` <= 1) or the delta of ``steps`` local steps."""
        g = np.asarray(grad, dtype=np.float32).reshape(-1)
        if g.size != self.n_params:
            raise ValueError(f"gradient has {g.size} values, not {self.n_params}")
        w = float(samples) if samples > 0 else 1.0
        with self._cond:
            self._updates.append((g.copy(), int(samples), int(steps)))
            self._deltas += int(steps > 1)
            self._samples += max(0, int(samples))
            self._count += 1
            self._late += int(bool(late))
            if math.isfinite(loss):
                self._loss_sum += w * float(loss)
                self._loss_weight += w

    @property
    def count(self) -> int:
        """Gradients folded into the open round."""
        with self._cond:
            return self._count

    @property
    def closed(self) -> bool:
        """The round is ready to be taken."""
        with self._cond:
            return self._closed

    def close(self) -> bool:
        """The site policy let boards go on: the round is ready if it holds any."""
        with self._cond:
            if self._count == 0:
                return False
            self._closed = True
            self._cond.notify_all()
            return True

    def take_central(self) -> np.ndarray | None:
        """The central parameters offered since the last call (None: nothing new)."""
        with self._cond:
            params, self._central = self._central, None
            return params

    # ---- the upstream worker's side -------------------------------------

    def offer(self, params: np.ndarray) -> None:
        """New central parameters landed: keep a copy for the fan-out, wake the site."""
        copy = np.array(params, dtype=np.float32, copy=True).reshape(-1)
        if copy.size != self.n_params:
            raise ValueError(f"parameters have {copy.size} values, not {self.n_params}")
        with self._cond:
            self._central = copy
            self._offers += 1
            self._cond.notify_all()
        wake = self.wake
        if wake is not None:
            wake()

    @property
    def offers(self) -> int:
        with self._cond:
            return self._offers

    def wait_offer(self, stop: Callable[[], bool], poll: float = 0.1) -> bool:
        """Block until a first `offer` (True) or ``stop`` says so (False)."""
        with self._cond:
            while self._offers == 0:
                if stop():
                    return False
                self._cond.wait(poll)
            return True

    def wait(
        self,
        stop: Callable[[], bool],
        *,
        beat: Callable[[], object] | None = None,
        beat_every: float = 5.0,
        clock: Callable[[], float],
        poll: float = 0.1,
        lr: float = 1.0,
    ) -> Folded | None:
        """Wait for the round to close and take it; None if ``stop`` came first.

        On a stop, a round that holds gradients is taken as it is. ``beat`` is
        called every ``beat_every`` seconds of waiting (the upstream heartbeat).
        ``lr``: the job's local SGD step, which makes a gradient folded with
        deltas the delta of one step.
        """
        next_beat = clock() + beat_every
        with self._cond:
            while not self._closed:
                if stop():
                    if self._count == 0:
                        return None
                    break
                self._cond.wait(poll)
                now = clock()
                if beat is not None and now >= next_beat:
                    next_beat = now + beat_every
                    self._cond.release()
                    try:
                        beat()
                    finally:
                        self._cond.acquire()
            return self._take(lr)

    def _take(self, lr: float) -> Folded:
        updates = self._updates
        claims = sorted(max(1, n) for _, n, _ in updates)
        cap = SAMPLE_CAP * claims[(len(claims) - 1) // 2]
        weights = [min(float(max(1, n)), cap) for _, n, _ in updates]
        steps = 1
        if self._deltas == 0:
            mean = combine([u for u, _, _ in updates], weights, self._rule, self._frac)
        else:
            # each gradient made the delta of one step at lr, as push_delta does
            vectors = [u if k > 1 else u * np.float32(lr) for u, _, k in updates]
            mean = combine(vectors, weights, self._rule, self._frac)
            step_sum = sum(
                w * max(1, k) for w, (_, _, k) in zip(weights, updates, strict=True)
            )
            steps = min(MAX_STEPS, max(2, round(step_sum / sum(weights))))
            self.delta_rounds += 1
        loss = self._loss_sum / self._loss_weight if self._loss_weight > 0 else math.nan
        out = Folded(float(loss), self._samples, mean, self._count, self._late, steps)
        self.rounds += 1
        self.folded += self._count
        self.late += self._late
        self.largest = max(self.largest, self._count)
        self._updates = []
        self._deltas = 0
        self._samples = self._count = self._late = 0
        self._loss_sum = self._loss_weight = 0.0
        self._closed = False
        return out
