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
    """Dynamic Synchronous Parallel, after Zhang et al., "A Parameter Communication
    Optimization Strategy for Distributed Machine Learning in Sensors", Sensors
    17(10):2172, 2017. This is our reading of the strategy, stated precisely.

    Speed. ``T_i`` is worker i's typical iteration time from the performance
    monitor (release to push: compute plus communication, never the time it
    was held at the barrier; the monitor clips one-off spikes, so transient
    interference barely moves it, while a run of slow iterations is adopted as
    a new level). ``T_max`` is the largest ``T_j`` over live workers and
    ``alpha_i = T_max / T_i >= 1``: how many iterations worker i completes per
    iteration of the slowest live worker. A worker not yet measured counts with
    the median of the measured ones (1.0 while nobody is measured).

    Progress. Each applied push of worker i adds ``1 / alpha_i`` (alpha at that
    moment) to its normalised progress ``P_i``, measured in iterations of the
    slowest worker; every worker running at its typical pace advances ``P`` at
    the same rate, ``1 / T_max`` per second, so a 4x faster board pushes 4
    gradients per straggler gradient instead of being held to its pace. A
    (re)joining worker starts at the smallest ``P`` of the other live workers.

    Transient grace (g = ``grace``, k = ``spike``). A live worker j that is
    computing and has been away more than k times its typical time is having a
    transient spike; it is credited with the progress it would have made at its
    typical pace: ``credit_j(now) = min(g, (now - released_j - T_j) / T_max)``
    once ``now - released_j > k * T_j``, else 0 (and 0 while it is waiting).
    When its push arrives, that credit (recomputed at arrival) is added to
    ``P_j`` for good: the interference is forgiven, not owed later. So an
    iteration hit by interference neither holds the others while it lasts nor
    afterwards, and the credit is finite: a worker away for longer does hold
    them, until it pushes or the liveness timeout removes it. Persistent
    slowness is not forgiven: once the monitor adopts the new level, its
    iterations are no longer spikes and alpha follows it instead.

    Rule (the weak threshold w). A waiting worker i may start its next
    iteration iff ``P_i <= min_j (P_j + credit_j(now)) + w`` over live workers j.

    Bound, in the policy's own units (iterations of the slowest live worker):
    among live workers ``max P - min P <= w + 2 g + 1`` at all times. A release
    needs ``P_i <= min P + w + g``; the one push that follows adds at most
    ``1 + g`` (``T_i / T_max <= 1`` plus forgiven credit); the minimum never
    decreases, as leavers only raise it and joiners start at it. With g = 0 and
    equal speeds this is SSP with s = w. Because the bound is in
    speed-normalised units it bounds staleness in wall time (about
    ``(w + 2 g + 1) * T_max`` seconds of progress) while each board works at its
    own pace. The cost is version staleness: fast boards push more often, so a
    straggler's gradient is many versions old when it lands; the
    staleness-aware step size (lr / (staleness + 1)) is available in the core
    to damp it.

    Default w = 8 (was 2), from the policy matrix (``edgeps bench policies
    --matrix``): w = 2 bound only while the monitor had not yet measured the
    slow boards (their first iterations count at the median pace), which cost
    up to 3x at 64 workers; w = 8 runs within 5% of the best policy in 41 of
    48 cells against 13 for w = 2, and never binds later on those tasks.

    Rounds (n = ``rounds``, s = ``spread``, l = ``late``; defaults 0 (off),
    1.5, 1.3; ``dsp:rounds=48`` turns them on from 48 live boards).
    With at least n live boards whose measured typical times lie within a
    factor s of each other (a board not yet measured counts as close), and
    fewer than one board per round turning late (below), DSP releases in
    rounds: on top of the rule above, a waiting worker goes on only once no
    live worker is computing that is still on time, where a worker is late
    once it has been away l times its typical time (a board not yet measured:
    l times the measured median). The pushes of a round then share a base
    version, as under BSP, while a late board (transient interference, a lost
    message, a crash) is not waited for: it pushes when it can and joins the
    next round. The share of iterations that turn late is an exponentially
    weighted mean over about a round's worth of iterations (weight
    1 / (N + 8)); while N times it exceeds 1 the rounds would keep waiting, and
    DSP releases by the rule above alone. Rounds only add holds, so the bound
    above is unchanged; a round never holds every live board (when all wait,
    nobody computes and the barrier is open). The barrier opens at an event
    (a push, a heartbeat, the core's tick), so a late board costs the others
    up to l x T plus one tick.

    Off by default. In the policy matrix at 64 workers (all six policies,
    both balancings, 24 cells) rounds from 48 boards made DSP within 5% of
    the best policy's time in 15 cells against 12, within 0.5 points of the
    best accuracy in 24 against 20, and strictly fastest in 2 of the 4 churn
    cells (at 32 workers rounds, like BSP, were level with asynchrony or
    slower, at 8 and 16 slower). On a real broker with 2,000 sensors of one
    update per second, though, they cut the applied updates from 1,949 to
    1,654 per second and raised serve's push-to-release p95 from 0.6 ms to
    654 ms (``edgeps bench scale``, README), so a user asks for them.

    Per-worker state kept here, not in the core's record: ``P_i`` (a dict by
    worker id). It is in this policy's own units, changes by rules only this
    policy knows, and is dropped when the worker leaves; the core's clocks stay
    plain counts for every other policy.
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
