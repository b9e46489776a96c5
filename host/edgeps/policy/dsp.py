"""Dynamic Synchronous Parallel: SSP with a bound that follows measured speed."""

from __future__ import annotations

import bisect
import math

from edgeps.core.policy_api import Policy
from edgeps.core.types import Push
from edgeps.core.view import ClusterView
from edgeps.policy.dsp_rounds import RoundBarrier


def _positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"dsp {name} must be a number, got {value!r}")
    v = float(value)
    if not (math.isfinite(v) and v >= 0):
        raise ValueError(f"dsp {name} must be a finite number >= 0, got {value!r}")
    return v


class DSP(Policy):
    """Dynamic Synchronous Parallel: SSP whose bound is in speed-normalised progress.

    After Zhang et al., "A Parameter Communication Optimization Strategy for
    Distributed Machine Learning in Sensors", Sensors 17(10):2172, 2017. This
    is our reading of the strategy, stated precisely; host/README.md ("DSP, as
    we read it") says why, and host/BENCHMARKS.md what it measured.

    Speed. ``T_i`` is worker i's typical iteration time from the performance
    monitor (release to push, never time held at the barrier; one-off spikes
    are clipped, a run of slow iterations is adopted as a new level).
    ``alpha_i = T_max / T_i >= 1`` over live workers. A worker not yet
    measured counts with the median of the measured ones (1.0 while nobody is
    measured).

    Progress. Each applied push of worker i adds ``1 / alpha_i`` to its
    normalised progress ``P_i``, in iterations of the slowest worker, so every
    worker at its typical pace advances ``P`` at the same rate. A (re)joining
    worker starts at the smallest ``P`` of the other live workers.

    Transient grace. A computing worker j away more than ``spike * T_j`` is
    credited ``credit_j(now) = min(grace, (now - released_j - T_j) / T_max)``
    (0 otherwise, and while it waits); its push adds that credit to ``P_j``
    for good. Persistent slowness is not forgiven: once the monitor adopts the
    new level, alpha follows it.

    Rule. A waiting worker i may start its next iteration iff
    ``P_i <= min_j (P_j + credit_j(now)) + w`` over live workers j.

    Bound, in iterations of the slowest live worker: among live workers
    ``max P - min P <= w + 2 * grace + 1`` at all times. A release needs
    ``P_i <= min P + w + grace``; the push that follows adds at most
    ``1 + grace``; the minimum never decreases (leavers only raise it, joiners
    start at it). With grace = 0 and equal speeds this is SSP with s = w.

    Rounds (off while ``rounds`` is 0). With at least ``rounds`` live boards
    whose typical times lie within a factor ``spread`` of each other (an
    unmeasured board counts as close), and fewer than one board per round
    turning late, a waiting worker also waits until no live worker that is
    still on time is computing; a worker is late once away ``late`` times its
    typical time (unmeasured: ``late`` times the measured median). The late
    share is an exponentially weighted mean with weight 1 / (N + 8); while N
    times it exceeds 1, DSP releases by the rule alone. Rounds only add holds,
    so the bound is unchanged, and a round never holds every live board.

    ``P_i`` is kept here, not in the core's record: it is in this policy's own
    units and is dropped when the worker leaves.

    Parameters
    ----------
    w : float
        The weak threshold: how far, in slowest-worker iterations, a worker may
        lead the least advanced live worker.
    grace : float
        The most progress a worker in a transient spike is credited.
    spike : float
        An iteration longer than ``spike`` times the worker's typical time is
        a spike (>= 1).
    damp : float
        0: off. Otherwise a push of staleness s steps by
        ``lr * min(1, damp * N / (s + 1))`` with N live workers.
    rounds : float
        Live boards needed to release in rounds; 0 turns rounds off.
    spread : float
        Largest ratio of typical times that still counts as one speed (>= 1).
    late : float
        Times its typical time after which a board is late to a round (>= 1).
    """

    name = "dsp"

    def __init__(
        self,
        w: float = 8.0,
        grace: float = 4.0,
        spike: float = 2.0,
        damp: float = 0.0,
        rounds: float = 0.0,
        spread: float = 1.5,
        late: float = 1.3,
    ) -> None:
        self.w = _positive("w", w)
        self.rounds = _positive("rounds", rounds)
        self.spread = _positive("spread", spread)
        self.late = _positive("late", late)
        if self.spread < 1.0 or self.late < 1.0:
            raise ValueError(
                f"dsp spread and late must be >= 1, got {spread!r}, {late!r}"
            )
        self.damp = _positive("damp", damp)
        self.grace = _positive("grace", grace)
        self.spike = _positive("spike", spike)
        if self.spike < 1.0:
            raise ValueError(f"dsp spike must be >= 1, got {spike!r}")
        self._progress: dict[str, float] = {}
        self._cached_floor: tuple[float, float] | None = None  # (now, floor)
        # typical times of the live workers, kept up to date per event so that
        # no event costs O(N): only the pusher's time changes, and the median
        # fill of the unmeasured comes from a sorted list of the measured
        self._live: set[str] = set()
        self._meas: dict[str, float] = {}  # live and measured: its typical time
        self._sorted: list[float] = []  # the values of _meas, sorted
        # (P, worker) of every live worker, sorted: the floor walks it upwards
        self._by_p: list[tuple[float, str]] = []
        self._seen = -1  # monitor generation _meas follows (see _note_time)
        # rounds: who is computing and when each turns overdue; whether the
        # barrier is open, fixed for one release pass (releases change it)
        self._barrier = RoundBarrier(self.late)
        self._cached_open: tuple[float, bool] | None = None  # (now, open)

    # -- speed ---------------------------------------------------------------
    def _fill(self) -> float:
        """The time of a live worker not yet measured: the measured median."""
        known = self._sorted
        return known[len(known) // 2] if known else 1.0

    def _time(self, wid: str) -> float:
        t = self._meas.get(wid)
        return self._fill() if t is None else t

    @property
    def _t_max(self) -> float:
        """Largest typical time over live workers (fills included; 1.0 if none)."""
        if not self._live:
            return 1.0
        top = self._sorted[-1] if self._sorted else -math.inf
        if len(self._meas) < len(self._live):
            top = max(top, self._fill())
        return top

    def _note_time(self, view: ClusterView, wid: str, observed: bool = False) -> None:
        """Take ``wid``'s current typical time from the monitor (``observed``:
        the core just fed it one sample); samples fed by anyone else show as
        an unexpected generation, and then every live worker is read again."""
        generation = view.monitor.generation
        if generation != self._seen + observed:
            self._meas.clear()
            self._sorted.clear()
            self._seen = generation
            for w in self._live:
                self._note_time(view, w)
            return
        self._seen = generation
        old = self._meas.pop(wid, None)
        if old is not None:
            del self._sorted[bisect.bisect_left(self._sorted, old)]
        if wid not in self._live:
            return
        t = view.monitor.typical_iteration(wid)
        if math.isfinite(t) and t > 0:
            self._meas[wid] = t
            bisect.insort(self._sorted, t)

    def _times(self, view: ClusterView) -> dict[str, float]:
        """Typical iteration time of each live worker (median fill for unmeasured)."""
        mon = view.monitor
        raw = {w: mon.typical_iteration(w) for w in view.live_ids()}
        known = sorted(t for t in raw.values() if math.isfinite(t) and t > 0)
        fill = known[len(known) // 2] if known else 1.0
        return {w: t if math.isfinite(t) and t > 0 else fill for w, t in raw.items()}

    def alpha(self, view: ClusterView, worker_id: str) -> float:
        """How many iterations ``worker_id`` does per slowest-worker iteration."""
        times = self._times(view)
        if worker_id not in times:
            return 1.0
        return max(times.values()) / times[worker_id]

    def progress(self, worker_id: str) -> float:
        """Normalised progress ``P`` of a worker (0.0 if unknown)."""
        return self._progress.get(worker_id, 0.0)

    def _floor_of_others(self, view: ClusterView, worker_id: str) -> float:
        """Smallest P of the other live workers."""
        for p, w in self._by_p:
            if w != worker_id:
                return p
        return self._progress.get(worker_id, 0.0)

    def _credit(
        self, view: ClusterView, worker_id: str, t: float, t_max: float, now: float
    ) -> float:
        """Progress owed to a worker whose current iteration is a transient spike."""
        if self.grace <= 0 or view.is_waiting(worker_id):
            return 0.0
        away = now - view.released_at(worker_id)
        if away <= self.spike * t:
            return 0.0
        return min(self.grace, (away - t) / t_max)

    def _set_progress(self, wid: str, p: float | None) -> None:
        """Set (None: drop) a worker's P, in the dict and in the sorted list."""
        old = self._progress.pop(wid, None)
        by_p = self._by_p
        if old is not None:
            at = bisect.bisect_left(by_p, (old, wid))
            if at < len(by_p) and by_p[at] == (old, wid):
                del by_p[at]
        if p is not None:
            self._progress[wid] = p
            bisect.insort(by_p, (p, wid))

    def _effective_floor(self, view: ClusterView, now: float) -> float:
        """min_j (P_j + credit_j) over live workers, walking P upwards from its min.

        Credit is never negative, so the walk stops at the first P at or above
        the best sum so far: usually after one worker, the one furthest behind.
        """
        best = math.inf
        t_max, fill, meas = self._t_max, self._fill(), self._meas
        grace, spike = self.grace, self.spike
        for p, w in self._by_p:
            if p >= best:
                break
            # _credit(view, w, _time(w), t_max, now), inlined: this loop is hot
            credit = 0.0
            if grace > 0 and not view.is_waiting(w):
                t = meas.get(w, fill)
                away = now - view.released_at(w)
                if away > spike * t:
                    credit = min(grace, (away - t) / t_max)
            if p + credit < best:
                best = p + credit
        return 0.0 if best == math.inf else best

    # -- hooks ---------------------------------------------------------------
    def refresh(self, view: ClusterView, now: float) -> None:
        # one floor per release pass instead of one per waiting worker
        self._cached_floor = (now, self._effective_floor(view, now))
        self._cached_open = (now, self._barrier_open(view, now))

    # -- rounds --------------------------------------------------------------
    def in_rounds(self, view: ClusterView) -> bool:
        """Release in rounds now? Enough live boards whose measured speeds are close."""
        if self.rounds <= 0 or len(self._live) < max(2.0, self.rounds):
            return False
        if len(self._live) * self._barrier.late_share > 1.0:
            return False  # more than one late board per round: rounds would wait
        known = self._sorted
        return not known or known[-1] <= self.spread * known[0]

    def _weight(self) -> float:
        """Weight of one iteration in the late share: about a round's worth."""
        return 1.0 / (len(self._live) + 8)

    def _barrier_open(self, view: ClusterView, now: float) -> bool:
        """Rounds: open once no live worker computes that is not late."""
        if self.rounds <= 0:
            return True
        pending = self._barrier.pending(now, self._fill(), self._weight())
        return pending == 0 or not self.in_rounds(view)

    def _open(self, view: ClusterView, now: float) -> bool:
        cached = self._cached_open
        if cached is not None and cached[0] == now:
            return cached[1]
        return self._barrier_open(view, now)

    def on_released(self, view: ClusterView, worker_id: str, now: float) -> None:
        if self.rounds > 0:
            self._barrier.started(worker_id, now, self._meas.get(worker_id))

    def on_joined(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._cached_floor = self._cached_open = None
        self._live.add(worker_id)
        self._set_progress(worker_id, self._floor_of_others(view, worker_id))
        self._note_time(view, worker_id)

    def on_left(self, view: ClusterView, worker_id: str, now: float) -> None:
        self._cached_floor = self._cached_open = None
        self._barrier.stopped(worker_id)
        self._set_progress(worker_id, None)
        self._live.discard(worker_id)
        self._note_time(view, worker_id)

    def on_applied(self, view: ClusterView, push: Push, now: float) -> None:
        self._cached_floor = self._cached_open = None
        wid = push.worker_id
        if self.rounds > 0:
            self._barrier.pushed(wid, self._weight())
        base = self._progress.get(wid)
        if base is None:
            base = self._floor_of_others(view, wid)
        self._note_time(view, wid, observed=True)
        t = self._time(wid) if wid in self._live else 1.0
        t_max = self._t_max
        # the core marks the pusher waiting before this hook: judge the spike
        # from its release time directly
        away = now - view.released_at(wid)
        owed = 0.0
        if self.grace > 0 and away > self.spike * t:
            owed = min(self.grace, (away - t) / t_max)
        self._set_progress(wid, base + t / t_max + owed)

    def step_scale(self, view: ClusterView, push: Push, staleness: int) -> float:
        """With ``damp`` d > 0: ``min(1, d * N / (staleness + 1))``, N live workers.

        Only a push staler than about d rounds of every live worker is damped.
        """
        if self.damp <= 0:
            return 1.0
        return min(1.0, self.damp * max(1, view.n_live) / (staleness + 1))

    keyed_release = True  # key: P (-inf if unknown); limit: the floor + w

    def release_key(self, view: ClusterView, worker_id: str) -> float:
        return self._progress.get(worker_id, -math.inf)

    def release_limit(self, view: ClusterView, now: float) -> float:
        if not self._open(view, now):
            return -math.inf
        return self._floor(view, now) + self.w

    def _floor(self, view: ClusterView, now: float) -> float:
        cached = self._cached_floor
        if cached is not None and cached[0] == now:
            return cached[1]
        return self._effective_floor(view, now)

    def may_proceed(self, view: ClusterView, worker_id: str, now: float) -> bool:
        if worker_id not in self._progress:
            return True
        if not self._open(view, now):
            return False
        return self._progress[worker_id] <= self._floor(view, now) + self.w

    # -- reporting -----------------------------------------------------------
    @property
    def bound(self) -> float:
        return self.w + 2.0 * self.grace + 1.0

    @property
    def bound_description(self) -> str:
        return (
            "max P - min P <= w + 2*grace + 1 = "
            f"{self.bound:g} (P: progress in slowest-worker iterations)"
        )

    def measure(self, view: ClusterView) -> float:
        ps = [self._progress[w] for w in view.live_ids() if w in self._progress]
        return max(ps) - min(ps) if ps else 0.0

    def describe(self) -> str:
        damp = f",damp={self.damp:g}" if self.damp > 0 else ""
        damp += f",rounds={self.rounds:g}"
        if self.rounds > 0:
            damp += f",spread={self.spread:g},late={self.late:g}"
        return f"dsp:w={self.w:g},grace={self.grace:g},spike={self.spike:g}{damp}"
