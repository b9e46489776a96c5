"""DSP: speed-normalised progress, transient grace, liveness, parsing."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import ParameterServer, Policy
from edgeps.core.types import Action, Applied, Join, Push, Release, Tick, WorkerLeft
from edgeps.policy import parse_policy
from edgeps.policy.dsp import DSP
from edgeps.sim.engine import EventLoop

from tests.helpers.dsp_oracle import ProgressOracle

N_PARAMS = 3


class TimedCluster:
    """Workers with scripted iteration times driving a real ParameterServer."""

    def __init__(self, policy: Policy, durations: dict[str, list[float]]) -> None:
        self.server = ParameterServer(
            np.zeros(N_PARAMS, np.float32), policy=policy, lr=0.01, liveness_timeout=5.0
        )
        self.loop = EventLoop()
        self.durations = durations  # per worker: iteration times, last one repeats
        self.pushes: dict[str, int] = dict.fromkeys(durations, 0)
        self.push_times: dict[str, list[float]] = {w: [] for w in durations}
        self.silent: set[str] = set()
        # DSP progress recomputed from the events seen here (not the policy's own)
        self.oracle: ProgressOracle | None = None
        if isinstance(policy, DSP):
            mon = self.server.monitor
            self.oracle = ProgressOracle(mon, policy.w, policy.grace, policy.spike)
        self.max_spread = 0.0
        for wid in durations:
            if self.oracle is not None:
                self.oracle.joined(wid, 0.0)
            self._carry_out(self.server.handle(Join(wid), 0.0))

    def _carry_out(self, actions: list[Action]) -> None:
        now, oracle = self.loop.now, self.oracle
        for act in actions:
            if oracle is not None and isinstance(act, Applied):
                oracle.applied(act.worker_id, now)
            elif oracle is not None and isinstance(act, WorkerLeft):
                oracle.left(act.worker_id)
            elif oracle is not None and isinstance(act, Release):
                assert oracle.released(act.worker_ids, now) == []
            if isinstance(act, Release):
                for wid in act.worker_ids:
                    if wid in self.silent:
                        continue
                    script = self.durations[wid]
                    d = script[min(self.pushes[wid], len(script) - 1)]
                    self.loop.after(d, self._push, wid, d, act.version)
        if oracle is not None:
            self.max_spread = max(self.max_spread, oracle.spread())

    def _push(self, wid: str, duration: float, version: int) -> None:
        if wid in self.silent:
            return
        self.pushes[wid] += 1
        self.push_times[wid].append(self.loop.now)
        push = Push(
            worker_id=wid,
            clock=self.pushes[wid],
            seq=self.pushes[wid],
            base_version=version,
            update=np.full(N_PARAMS, 0.1, np.float32),
            compute_time=duration,
        )
        self._carry_out(self.server.handle(push, self.loop.now))

    def _tick(self, every: float) -> None:
        self._carry_out(self.server.handle(Tick(), self.loop.now))
        self.loop.after(every, self._tick, every)

    def run(self, until: float, tick_every: float = 0.05) -> None:
        self.loop.after(tick_every, self._tick, tick_every)
        self.loop.run_until(until, max_events=200_000)


def test_fast_workers_run_at_their_own_pace_unlike_ssp() -> None:
    # Prepare: one board is a persistent 4x straggler
    durations = {"fast0": [0.1], "fast1": [0.1], "slow": [0.4]}
    dsp = TimedCluster(DSP(w=2), durations)
    ssp = TimedCluster(parse_policy("ssp:2"), durations)
    # Execute
    dsp.run(40.0)
    ssp.run(40.0)
    # Assert: DSP lets a fast board push ~4 gradients per straggler gradient,
    # fixed-bound SSP drags it to the straggler's pace in the long run
    assert dsp.pushes["fast0"] / dsp.pushes["slow"] > 3.5
    assert ssp.pushes["fast0"] / ssp.pushes["slow"] < 1.2
    assert dsp.max_spread <= dsp.server.policy.bound


def test_a_transient_spike_neither_holds_the_others_nor_costs_them_later() -> None:
    # Prepare: equal boards; "hit" has one 0.5 s iteration (5x) at its 20th push
    spiky = [0.1] * 20 + [0.5] + [0.1]
    grace = TimedCluster(DSP(w=2, grace=4), {"a": [0.1], "b": [0.1], "hit": spiky})
    strict = TimedCluster(DSP(w=2, grace=0), {"a": [0.1], "b": [0.1], "hit": spiky})
    # Execute
    grace.run(10.0)
    strict.run(10.0)
    # Assert: with grace the others never wait (their pushes stay 0.1 s apart)
    gaps = np.diff(grace.push_times["a"])
    assert gaps.max() < 0.1 + 1e-6
    assert grace.pushes["a"] >= 99
    # without grace the spike holds them, so the design choice is observable
    assert np.diff(strict.push_times["a"]).max() > 0.15


def test_a_silent_worker_holds_within_the_bound_then_its_death_frees_the_rest() -> None:
    # Prepare
    c = TimedCluster(DSP(w=2, grace=1), {"a": [0.1], "b": [0.1], "ghost": [0.1]})
    c.run(1.0)
    c.silent.add("ghost")  # stops pushing and heartbeating
    before = c.pushes["a"]
    # Execute: the liveness timeout is 5 s
    c.loop.run_until(12.0)
    # Assert: "a" was held for a while (the ghost's grace is finite), then went on
    # once the ghost was declared dead
    times = np.array(c.push_times["a"])
    assert np.diff(times[before - 1 :]).max() > 2.0
    assert (times > 8.0).sum() > 30
    assert c.server.view.is_live("ghost") is False
    assert c.server.forced_releases == 0


def test_alpha_and_progress_follow_the_monitor() -> None:
    c = TimedCluster(DSP(w=2), {"fast": [0.1], "slow": [0.3]})
    c.run(12.0)
    policy = c.server.policy
    assert isinstance(policy, DSP)
    assert policy.alpha(c.server.view, "slow") == pytest.approx(1.0)
    assert policy.alpha(c.server.view, "fast") == pytest.approx(3.0, rel=0.1)
    # both advance about 1 unit of progress per slow iteration (40 in 12 s)
    assert policy.progress("fast") == pytest.approx(40, abs=3)
    assert policy.progress("slow") == pytest.approx(40, abs=3)


def test_parse_and_describe_round_trip_and_bad_options() -> None:
    p = parse_policy("dsp:w=8")
    assert isinstance(p, DSP) and p.w == 8.0
    again = parse_policy(p.describe())
    assert isinstance(again, DSP)
    assert (again.w, again.grace, again.spike) == (p.w, p.grace, p.spike)
    assert p.bound == 8 + 2 * 4 + 1 and "w + 2*grace + 1" in p.bound_description
    for bad in ("dsp:w=-1", "dsp:w=abc", "dsp:speed=2", "dsp:spike=0.5", "dsp:w=inf"):
        with pytest.raises(ValueError):
            parse_policy(bad)
    with pytest.raises(ValueError):
        DSP(w=True)  # type: ignore[arg-type]


def test_a_board_that_turns_persistently_slow_moves_alpha_not_the_others() -> None:
    # Prepare: "turn" runs like the others for 30 iterations, then 4x slower for good
    c = TimedCluster(DSP(w=2), {"a": [0.1], "b": [0.1], "turn": [0.1] * 30 + [0.4]})
    # Execute
    c.run(30.0)
    # Assert: the monitor adopted the new level, so alpha follows it ...
    policy = c.server.policy
    assert isinstance(policy, DSP)
    assert policy.alpha(c.server.view, "a") == pytest.approx(4.0, rel=0.15)
    # ... and in the last 10 s the others pushed ~4 gradients per slow one
    late = {w: sum(t > 20.0 for t in ts) for w, ts in c.push_times.items()}
    assert late["a"] / late["turn"] > 3.5
