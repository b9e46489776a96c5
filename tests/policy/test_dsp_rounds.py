"""DSP's rounds: when the monitor finds speeds close, pushes share a base version.

The round barrier alone (deadlines, blind workers), then DSP with ``rounds``
on a real ParameterServer: close speeds release in rounds, a transient spike
does not turn a round into a wait, persistently different speeds keep the
speed-normalised bound, and keyed release passes agree with full scans.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from edgeps.core.types import Action, Release
from edgeps.policy import parse_policy
from edgeps.policy.dsp import DSP
from edgeps.policy.dsp_rounds import RoundBarrier

from tests.core.test_aggregates import Driver
from tests.policy.test_dsp import TimedCluster


def test_barrier_waits_for_the_computing_until_they_are_late() -> None:
    # Prepare: a measured worker (T = 0.1) and a blind one, late = 2
    b = RoundBarrier(late=2.0)
    b.started("a", 0.0, 0.1)
    b.started("blind", 0.0, None)
    # Execute / Assert: both are waited for at first; the blind one is judged
    # by the measured median it is given (here 0.5: not late at 0.15)
    assert b.pending(0.1, fill=0.1, weight=0.5) == 2
    assert b.pending(0.15, fill=0.5, weight=0.5) == 2
    # past 2 x 0.1 both are late: "a" by its own time, "blind" by the fill
    assert b.pending(0.21, fill=0.1, weight=0.5) == 0
    assert b.late_share == pytest.approx(0.75)  # two iterations turned late
    # once late, late for this iteration, whatever the median does next
    assert b.pending(0.22, fill=1.0, weight=0.5) == 0
    # a late push is not counted again; a push on time counts as on time
    b.pushed("blind", weight=0.5)
    assert b.late_share == pytest.approx(0.75)
    b.started("a", 0.3, 0.1)
    assert b.pending(0.35, fill=0.1, weight=0.5) == 1 and b.is_computing("a")
    b.pushed("a", weight=0.5)
    assert b.pending(10.0, fill=0.1, weight=0.5) == 0 and not b.is_computing("a")
    assert b.late_share == pytest.approx(0.375)


class RoundCluster(TimedCluster):
    """A TimedCluster that also records which workers each release named."""

    def __init__(self, policy: DSP, durations: dict[str, list[float]]) -> None:
        self.releases: list[tuple[str, ...]] = []
        super().__init__(policy, durations)

    def _carry_out(self, actions: list[Action]) -> None:
        for act in actions:
            if isinstance(act, Release):
                self.releases.append(act.worker_ids)
        super()._carry_out(actions)


def _together(c: RoundCluster) -> list[set[str]]:
    """The workers of each release that named more than one worker."""
    return [set(ids) for ids in c.releases if len(ids) > 1]


def test_close_speeds_release_in_rounds_and_pushes_share_a_base_version() -> None:
    # Prepare: four boards within 10% of each other
    durations = {"a": [0.1], "b": [0.105], "c": [0.095], "d": [0.1]}
    rounds = RoundCluster(DSP(rounds=2), durations)
    free = RoundCluster(DSP(rounds=0), durations)
    # Execute
    rounds.run(5.0)
    free.run(5.0)
    # Assert: with rounds every worker is released with the others, every
    # round, so each push of a round was computed on the same version
    together = _together(rounds)
    assert len(together) >= 40
    assert all(ids == set(durations) for ids in together)
    counts = rounds.pushes
    assert max(counts.values()) - min(counts.values()) <= 1
    # without rounds the same boards are released one at a time
    assert _together(free) == []
    assert rounds.max_spread <= rounds.server.policy.bound


def test_rounds_48_release_a_large_fleet_of_similar_boards_in_rounds() -> None:
    # Prepare: 50 boards within 10% of each other, DSP with rounds from 48
    durations = {f"w{i:02d}": [0.1 + 0.01 * (i % 3) - 0.01] for i in range(50)}
    c = RoundCluster(DSP(rounds=48), durations)
    # Execute
    c.run(3.0)
    # Assert: after the start every release names the whole fleet
    policy = c.server.policy
    assert isinstance(policy, DSP) and policy.in_rounds(c.server.view)
    together = _together(c)
    assert len(together) >= 20 and all(len(ids) == 50 for ids in together[1:])


def test_a_transient_spike_does_not_turn_a_round_into_a_wait() -> None:
    # Prepare: "hit" has one 0.8 s iteration (8x) at its 20th push
    spiky = [0.1] * 20 + [0.8] + [0.1]
    c = RoundCluster(DSP(rounds=2), {"a": [0.1], "b": [0.1], "hit": spiky})
    # Execute
    c.run(6.0)
    # Assert: the others wait at most about late x T (0.13 s) for "hit", not
    # the 0.8 s it is away, plus one tick (0.05 s) for the barrier to notice
    gaps = np.diff(c.push_times["a"])
    assert 0.12 < gaps.max() < 0.19
    # and they went on in rounds of their own while it was away
    assert c.pushes["a"] >= 50 and c.pushes["a"] - c.pushes["hit"] >= 3


def test_persistently_different_speeds_keep_the_speed_normalised_bound() -> None:
    # Prepare: one board is a persistent 4x straggler (spread 4 > 1.25)
    durations = {"fast0": [0.1], "fast1": [0.1], "slow": [0.4]}
    c = RoundCluster(DSP(rounds=2), durations)
    # Execute
    c.run(20.0)
    # Assert: no rounds after the start; fast boards run at their own pace
    policy = c.server.policy
    assert isinstance(policy, DSP)
    assert not policy.in_rounds(c.server.view)
    assert c.pushes["fast0"] / c.pushes["slow"] > 3.5


def test_rounds_need_enough_live_boards() -> None:
    # Prepare: rounds from 4 live boards, only 3 running
    c = RoundCluster(DSP(rounds=4), {"a": [0.1], "b": [0.1], "c": [0.1]})
    # Execute
    c.run(3.0)
    # Assert
    policy = c.server.policy
    assert isinstance(policy, DSP) and not policy.in_rounds(c.server.view)
    assert _together(c) == []


def _grouped(log: list[tuple[Any, ...]]) -> int:
    """Workers released in releases that named more than one."""
    releases = [e for entry in log for e in entry[1:] if e[0] == "release"]
    return sum(len(e[1]) for e in releases if len(e[1]) > 1)


@pytest.mark.parametrize(
    "policy", ["dsp:rounds=2,spread=100,late=100", "dsp:rounds=3,spread=100,late=2"]
)
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_rounds_keyed_release_passes_decide_as_full_scans_do(
    policy: str, seed: int
) -> None:
    # Prepare: boards of speeds 0.2-3 s that leave, restart and go silent
    keyed, scan = Driver(policy, seed, keyed=True), Driver(policy, seed, keyed=False)
    plain = Driver("dsp:rounds=0", seed, keyed=True)
    # Execute
    for _ in range(600):
        keyed.step()
        scan.step()
        plain.step()
    # Assert: the same decisions, and rounds really happened (more workers
    # released together than without rounds, on the same events)
    assert keyed.log == scan.log
    assert keyed.ps.forced_releases == scan.ps.forced_releases == 0
    assert _grouped(keyed.log) > _grouped(plain.log)


def test_parse_and_describe_rounds() -> None:
    p = parse_policy("dsp:rounds=48,spread=1.2,late=1.5")
    assert isinstance(p, DSP) and (p.rounds, p.spread, p.late) == (48.0, 1.2, 1.5)
    again = parse_policy(p.describe())
    assert isinstance(again, DSP)
    assert (again.rounds, again.spread, again.late) == (48.0, 1.2, 1.5)
    off = parse_policy("dsp:rounds=0")
    assert isinstance(off, DSP) and off.rounds == 0
    assert parse_policy(off.describe()).describe() == off.describe()
    for bad in ("dsp:spread=0.9", "dsp:rounds=-1", "dsp:spread=x", "dsp:late=0.5"):
        with pytest.raises(ValueError):
            parse_policy(bad)


def test_below_the_rounds_threshold_dsp_decides_as_without_rounds() -> None:
    # Prepare: 10 boards; rounds=48 has rounds only from 48 live boards
    assert DSP().rounds == 0  # off by default
    with_rounds = Driver("dsp:rounds=48", 7, True)
    without = Driver("dsp:rounds=0", 7, True)
    # Execute
    for _ in range(600):
        with_rounds.step()
        without.step()
    # Assert: every action of every event is the same
    assert with_rounds.log == without.log
