"""The job's feature scaler from its workers' data: ``serve --scaler-from workers``.

No raw row leaves a worker: each CPython worker's HELLO carries the moments
of its own data (rows, per-feature means and population variances), and the
PS combines them exactly (`Scaler.merge` of each worker's rows, sums and sums
of squares in float64). Until the scaler is fixed nobody is welcomed, so every
WELCOME of the run carries the same scaler: `ScalerGate` holds each worker's
latest HELLO (a re-HELLO keeps its place) until moments from ``workers``
distinct workers arrived, or ``wait`` seconds after the first moments, with
at least one. Workers without moments (boards) wait like the others. Then it
fixes the scaler, once for the run, and lets the held HELLOs through in the
order they first came. For windows and images (``shape``) the combined
per-feature moments are pooled per channel (`edgeps.model.windows`).

Moments of another feature count, or absurd ones, are refused: counted per
worker and reason, logged, never raised. Time is an argument (``now``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from edgeps.core.types import Join
from edgeps.model.scaler import Scaler
from edgeps.model.windows import pool_channels

log = logging.getLogger(__name__)

# HELLOs held at most while the scaler is open; more (made-up ids) are dropped
# and counted: the worker asks again after its release timeout
MAX_HELD = 4096
# a feature mean or std past this is no measurement float32 features can carry
MOMENT_LIMIT = 1e30


class MomentsRefused(ValueError):
    """A worker's moments the job cannot use; ``reason`` is the counter's name."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


def worker_part(moments: Any, n_features: int) -> Scaler:
    """One worker's scaler from HELLO's (rows, means, variances).

    Its sums are ``rows * mean`` and its sums of squares ``rows * (var +
    mean^2)``, in float64; `MomentsRefused` names what is wrong.
    """
    try:
        rows, mean, var = moments
        m = np.asarray(mean, dtype=np.float64).reshape(-1)
        v = np.asarray(var, dtype=np.float64).reshape(-1)
        if isinstance(rows, bool) or int(rows) != rows:
            raise TypeError(f"rows {rows!r}")
        n = int(rows)
    except (TypeError, ValueError) as exc:
        raise MomentsRefused("moments_malformed", f"moments {exc}") from None
    if m.size != n_features or v.size != n_features:
        raise MomentsRefused(
            "moments_features",
            f"moments of {m.size} features, the job's model takes {n_features}",
        )
    if n < 1:
        raise MomentsRefused("moments_rows", f"moments of {n} rows")
    finite = np.all(np.isfinite(m)) and np.all(np.isfinite(v))
    if not finite or np.any(v < 0):
        raise MomentsRefused("moments_value", "moments not finite, or a variance < 0")
    if np.max(np.abs(m)) > MOMENT_LIMIT or np.max(v) > MOMENT_LIMIT**2:
        raise MomentsRefused("moments_value", "a mean or std beyond 1e30")
    return Scaler.from_moments(n, n * m, n * (v + np.square(m)))


class ScalerGate:
    """Holds HELLOs until the job's scaler is fixed from workers' moments.

    Parameters
    ----------
    n_features: the model's feature count; moments of another are refused.
    workers: K, the distinct workers whose moments fix the scaler.
    wait: seconds after the first accepted moments to fix it with fewer.
    on_fixed: told the scaler once, when it is fixed (before any HELLO passes).
    shape: a sample's (C, L) or (C, H, W): the scaler is fixed per channel.
    """

    def __init__(
        self,
        n_features: int,
        *,
        workers: int = 2,
        wait: float = 30.0,
        on_fixed: Callable[[Scaler], None] | None = None,
        max_held: int = MAX_HELD,
        shape: tuple[int, ...] | None = None,
    ) -> None:
        if workers < 1 or wait <= 0 or n_features < 1:
            raise ValueError("a scaler gate needs workers >= 1, wait > 0, features")
        self.n_features = n_features
        self.workers = workers
        self.wait = wait
        self.on_fixed = on_fixed
        self.max_held = max_held
        self.shape = shape
        self.held: dict[str, Join] = {}  # first-come order; the latest HELLO each
        self.parts: dict[str, Scaler] = {}  # accepted moments, per worker
        self.refused: dict[str, Counter[str]] = {}
        self.held_full = 0  # HELLOs dropped while max_held were held
        self.deadline: float | None = None
        self.fixed: Scaler | None = None
        self.fixed_from = 0  # workers whose moments the scaler holds

    @property
    def waiting(self) -> bool:
        """True while the scaler is not fixed (HELLOs are held)."""
        return self.fixed is None

    def hold(self, join: Join, moments: Any, now: float) -> bool:
        """Take a HELLO's Join and its moments (None: none); True while held."""
        if self.fixed is not None:
            return False
        wid = join.worker_id
        if wid not in self.held and len(self.held) >= self.max_held:
            self.held_full += 1
            if self.held_full <= 3:
                log.warning("HELLO of %s dropped: %d held already", wid, self.max_held)
            return True
        self.held[wid] = join
        if moments is not None:
            self._take(wid, moments, now)
        return True

    def _take(self, wid: str, moments: Any, now: float) -> None:
        try:
            part = worker_part(moments, self.n_features)
        except MomentsRefused as exc:
            self.parts.pop(wid, None)  # its latest HELLO says its data is this
            self._refuse(wid, exc.reason, str(exc))
            return
        self.parts[wid] = part
        if self.deadline is None:
            self.deadline = now + self.wait

    def _refuse(self, wid: str, reason: str, detail: str) -> None:
        counts = self.refused.setdefault(wid, Counter())  # held ids only: bounded
        counts[reason] += 1
        level = logging.WARNING if counts[reason] <= 3 else logging.DEBUG
        log.log(level, "moments of %s refused: %s (%s)", wid, reason, detail)

    def leave(self, worker_id: str, nonce: int | None) -> None:
        """A held worker's link ended (BYE, last will): its HELLO is void."""
        join = self.held.get(worker_id)
        if join is not None and join.nonce == nonce:
            del self.held[worker_id]

    def due(self, now: float) -> bool:
        """True when the scaler can be fixed: K workers' moments, or the wait over."""
        if self.fixed is not None or not self.parts:
            return False
        waited = self.deadline is not None and now >= self.deadline
        return len(self.parts) >= self.workers or waited

    def admit(self, now: float) -> list[Join] | None:
        """Fix the scaler when due and hand back the held HELLOs; None: not yet."""
        if not self.due(now):
            return None
        parts = list(self.parts.values())
        total = parts[0]
        for part in parts[1:]:
            total = total.merge(part)
        total = pool_channels(total, self.shape)
        self.fixed, self.fixed_from = total, len(parts)
        log.info(
            "feature scaler fixed from the data of %d worker%s, %d rows",
            len(parts),
            "" if len(parts) == 1 else "s",
            total.n,
        )
        if self.on_fixed is not None:
            self.on_fixed(total)
        joins = list(self.held.values())
        self.held.clear()
        self.parts.clear()
        return joins

    def report(self) -> dict[str, Any]:
        """For metrics records: fixed or waiting, from how many workers and rows."""
        return {
            "state": "waiting" if self.fixed is None else "fixed",
            "workers": self.fixed_from if self.fixed is not None else len(self.parts),
            "rows": (
                self.fixed.n
                if self.fixed is not None
                else sum(p.n for p in self.parts.values())
            ),
            "held": len(self.held),
            "held_full": self.held_full,
            "refused": {w: dict(c) for w, c in sorted(self.refused.items())},
        }
