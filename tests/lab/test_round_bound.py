"""What a BSP round is bounded by: the expected max over boards, balanced or not."""

from __future__ import annotations

import json

import numpy as np
import pytest
from edgeps.lab.bench.round_bound import bound, even_batches, leg, round_times
from edgeps.workloads.bursts import Bursts
from edgeps.workloads.scenarios import WorkerProfile, make_scenario


def test_even_batches_shrink_only_the_persistently_slow_boards() -> None:
    profiles = list(make_scenario("stragglers", 8, 0).profiles.values())
    batches = even_batches(profiles)
    for p, b in zip(profiles, batches, strict=True):
        if p.straggler_factor > 1:
            # 4x slower, a tenth of compute fixed: 0.4 (0.1 + 0.9 b / 32) = 0.1
            assert b == pytest.approx(5, abs=1)
        else:
            assert b == 32


def test_a_lost_attempt_costs_the_retry_timeout() -> None:
    rng = np.random.default_rng(1)
    p = WorkerProfile(link_delay=0.01, loss_p=0.5)
    legs = [leg(p, rng, retry=0.3) for _ in range(4000)]
    # geometric: on average p / (1 - p) = 1 lost attempt before the one that lands
    assert np.mean(legs) == pytest.approx(0.01 + 0.3, rel=0.1)
    assert min(legs) == pytest.approx(0.01)


def test_a_round_waits_for_the_slowest_of_many_spiky_boards() -> None:
    spiky = [WorkerProfile(interference_p=0.1, interference_factor=5.0)] * 64
    quiet = [WorkerProfile()] * 64
    batches = [32] * 64
    spiky_rounds = round_times(spiky, batches, 300)
    quiet_rounds = round_times(quiet, batches, 300)
    # with 64 boards at p=0.1 nearly every round holds a 5x spike
    assert np.median(spiky_rounds) > 4 * np.median(quiet_rounds)
    assert np.median(round_times(spiky[:2], [32, 32], 300)) < np.median(spiky_rounds)


def test_the_bound_in_mixed_at_64_counts_spikes_and_stragglers() -> None:
    b = bound("mixed", 64, rounds=300)
    assert b.spike_share > 0.99
    assert b.round_on < b.round_off
    assert b.samples_on < b.samples_off
    assert b.samples_speedup < b.rounds_speedup
    lossy = bound("lossy", 8, rounds=300)
    assert lossy.rounds_speedup == pytest.approx(1.0, abs=0.1)  # nothing to even out


def test_bench_rounds_prints_json(capsys: pytest.CaptureFixture[str]) -> None:
    from edgeps.cli import main

    argv = ["bench", "rounds", "--scenarios", "stragglers", "--sizes", "8"]
    assert main([*argv, "--rounds", "50", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["scenario"] == "stragglers" and row["workers"] == 8
    assert row["rounds_speedup"] > 2


def test_rounds_that_meet_a_disturbed_boards_bursts_wait_for_it() -> None:
    # one board of four shares its CPU (0.8) for 2 s of every 6 s
    quiet = WorkerProfile(compute_jitter=0.0, link_delay=0.0)
    loud = WorkerProfile(
        compute_jitter=0.0, link_delay=0.0, bursts=Bursts(2.0, 6.0, 0.8, 1.0)
    )
    rounds = round_times([loud, quiet, quiet, quiet], [32] * 4, 200)
    starts = np.concatenate([[0.0], np.cumsum(rounds)[:-1]])
    inside = [r for s, r in zip(starts, rounds, strict=True) if 1.0 <= s < 2.5]
    outside = [r for s, r in zip(starts, rounds, strict=True) if 3.0 <= s < 6.9]
    assert inside and outside
    assert np.allclose(inside, 0.5) and np.allclose(outside, 0.1)
