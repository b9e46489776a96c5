"""The job's feature scaler from its workers' data: ``serve --scaler-from workers``.

No raw row leaves a worker: each CPython worker's HELLO carries the moments
of its own data (rows, per-feature means and population variances), and the
PS combines them exactly (`Scaler.merge` of each worker's rows, sums and sums
of squares in float64). Until the scaler is fixed nobody is welcomed, so every
WELCOME of the run carries the same scaler: `ScalerGate` holds each worker's
latest HELLO (a re-HELLO keeps its place) until moments from ``workers``
distinct workers arrived and then ``grace`` seconds more passed, or ``wait``
seconds after the first moments, with at least one. Workers without moments
(boards) wait like the others. Then it fixes the scaler, once for the run,
and lets the held HELLOs through in the order they first came. For windows
and images (``shape``) the combined per-feature moments are pooled per
channel (`edgeps.model.windows`).

A worker that lies about its data must not decide the scaler (`robust_merge`):
the grace lets the fleet's moments in after the first K (two made-up ids
that answer first no longer fix it alone); with three workers or more, a
worker whose means lie more than ``OUTLIER_STDS`` of the fleet's std (its
median std and its means' spread) from the fleet's median means, or whose
std is more than ``STD_RATIO`` times the fleet's, is left out (counted as
``moments_outlier``); and each worker's rows count at most ``ROW_CAP``
times the fleet's (lower) median rows, so a claim of 4,294,967,295 rows
weighs no more than two honest shards.

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
# seconds the scaler stays open after the K-th worker's moments (at most ``wait``)
GRACE = 5.0
# a worker's means this many fleet stds from the fleet's median: an outlier
OUTLIER_STDS = 4.0
# a worker's std this many times the fleet's (median) std: an outlier
STD_RATIO = 10.0
# a worker's rows count at most this many times the fleet's lower median rows
ROW_CAP = 2.0


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
    n, m, v = checked_moments(moments, n_features)
    return Scaler.from_moments(n, n * m, n * (v + np.square(m)))


def checked_moments(moments: Any, n_features: int) -> tuple[int, Any, Any]:
    """(rows, means, variances) of a HELLO, float64; `MomentsRefused` if unusable."""
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
    return n, m, v


def robust_merge(
    parts: dict[str, tuple[int, Any, Any]],
) -> tuple[Scaler, list[str]]:
    """The scaler of the workers' moments a few liars cannot move far; the outliers.

    With three workers or more, those whose means or stds are far from the
    fleet's medians are left out (all kept if that would leave none). Each
    kept worker's rows are capped at ``ROW_CAP`` x the lower median rows.
    """
    wids = list(parts)
    outliers: list[str] = []
    if len(wids) >= 3:
        means = np.stack([parts[w][1] for w in wids])
        stds = np.sqrt(np.stack([parts[w][2] for w in wids]))
        mid_mean = np.median(means, axis=0)
        # the fleet's std: the workers' own (median) and their means' spread
        # (1.4826 x the median absolute deviation), so skewed shards count
        spread = 1.4826 * np.median(np.abs(means - mid_mean), axis=0)
        mid_std = np.sqrt(np.median(stds, axis=0) ** 2 + spread**2)
        scale = mid_std + 1e-9 * (1.0 + np.abs(mid_mean))
        far = np.any(np.abs(means - mid_mean) > OUTLIER_STDS * scale, axis=1)
        wide = np.any(stds > STD_RATIO * scale, axis=1)
        outliers = [w for w, bad in zip(wids, far | wide, strict=True) if bad]
        if len(outliers) == len(wids):
            outliers = []
    kept = [w for w in wids if w not in outliers]
    rows = sorted(parts[w][0] for w in kept)
    cap = max(1, int(ROW_CAP * rows[(len(rows) - 1) // 2]))
    total: Scaler | None = None
    for w in kept:
        n, m, v = parts[w]
        n = min(n, cap)
        part = Scaler.from_moments(n, n * m, n * (v + np.square(m)))
        total = part if total is None else total.merge(part)
    assert total is not None
    return total, outliers


class ScalerGate:
    """Holds HELLOs until the job's scaler is fixed from workers' moments.

    Parameters
    ----------
    n_features: the model's feature count; moments of another are refused.
    workers: K, the distinct workers whose moments fix the scaler.
    wait: seconds after the first accepted moments to fix it with fewer.
    grace: seconds the scaler stays open after the K-th worker's moments
        (at most ``wait``), for the rest of the fleet's to come in.
    on_fixed: told the scaler once, when it is fixed (before any HELLO passes).
    shape: a sample's (C, L) or (C, H, W): the scaler is fixed per channel.
    """

    def __init__(
        self,
        n_features: int,
        *,
        workers: int = 2,
        wait: float = 30.0,
        grace: float = GRACE,
        on_fixed: Callable[[Scaler], None] | None = None,
        max_held: int = MAX_HELD,
        shape: tuple[int, ...] | None = None,
    ) -> None:
        if workers < 1 or wait <= 0 or n_features < 1:
            raise ValueError("a scaler gate needs workers >= 1, wait > 0, features")
        self.n_features = n_features
        self.workers = workers
        self.wait = wait
        self.grace = max(0.0, min(grace, wait))
        self.on_fixed = on_fixed
        self.max_held = max_held
        self.shape = shape
        self.held: dict[str, Join] = {}  # first-come order; the latest HELLO each
        self.parts: dict[str, tuple[int, Any, Any]] = {}  # accepted moments
        self.quorum_at: float | None = None  # when K workers' moments were in
        self.refused: dict[str, Counter[str]] = {}
        self.held_full = 0  # HELLOs dropped while max_held were held
        self.deadline: float | None = None
        self.fixed: Scaler | None = None
        self.fixed_from = 0  # workers whose moments the scaler holds
        self.outliers: list[str] = []  # workers whose moments were left out

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
            part = checked_moments(moments, self.n_features)
        except MomentsRefused as exc:
            self.parts.pop(wid, None)  # its latest HELLO says its data is this
            self._refuse(wid, exc.reason, str(exc))
            return
        self.parts[wid] = part
        if self.deadline is None:
            self.deadline = now + self.wait
        if self.quorum_at is None and len(self.parts) >= self.workers:
            self.quorum_at = now

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
        """True when the scaler can be fixed: K workers' moments and the grace
        over, or the wait over."""
        if self.fixed is not None or not self.parts:
            return False
        waited = self.deadline is not None and now >= self.deadline
        at = self.quorum_at
        quorum = at is not None and len(self.parts) >= self.workers
        return waited or (quorum and at is not None and now >= at + self.grace)

    def admit(self, now: float) -> list[Join] | None:
        """Fix the scaler when due and hand back the held HELLOs; None: not yet."""
        if not self.due(now):
            return None
        total, outliers = robust_merge(self.parts)
        for wid in outliers:
            self._refuse(wid, "moments_outlier", "moments far from the fleet's")
        total = pool_channels(total, self.shape)
        kept = len(self.parts) - len(outliers)
        self.fixed, self.fixed_from, self.outliers = total, kept, outliers
        log.info(
            "feature scaler fixed from the data of %d worker%s, %d rows (capped)%s",
            kept,
            "" if kept == 1 else "s",
            total.n,
            f", {len(outliers)} left out as outliers" if outliers else "",
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
                else sum(p[0] for p in self.parts.values())
            ),
            "held": len(self.held),
            "held_full": self.held_full,
            "outliers": list(self.outliers),
            "refused": {w: dict(c) for w, c in sorted(self.refused.items())},
        }
