"""Scenarios: named profiles, determinism, sampling behaviour, validation."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.workloads.scenarios import (
    SCENARIOS,
    WorkerProfile,
    make_scenario,
    worker_ids,
)


def test_every_named_scenario_builds_for_eight_workers() -> None:
    for name in ("homogeneous", "stragglers", "interference", "mixed", "churn"):
        sc = make_scenario(name, 8, seed=0)
        assert sc.n_workers == 8 and sc.name == name
        assert list(sc.profiles) == worker_ids(8)
    assert set(SCENARIOS) >= {"homogeneous", "stragglers", "mixed", "churn"}


def test_stragglers_are_two_of_eight_four_times_slower_chosen_by_seed() -> None:
    a = make_scenario("stragglers", 8, seed=1)
    b = make_scenario("stragglers", 8, seed=1)
    slow = [w for w, p in a.profiles.items() if p.straggler_factor == 4.0]
    assert len(slow) == 2
    assert a == b
    other = [
        frozenset(
            w
            for w, p in make_scenario("stragglers", 8, seed=s).profiles.items()
            if p.straggler_factor == 4.0
        )
        for s in range(6)
    ]
    assert len(set(other)) > 1


def test_mixed_combines_stragglers_interference_and_link_trouble() -> None:
    sc = make_scenario("mixed", 8, seed=0)
    ps = list(sc.profiles.values())
    assert sum(p.straggler_factor == 4.0 for p in ps) == 2
    assert all(p.interference_p == 0.1 and p.interference_factor == 5.0 for p in ps)
    assert all(p.link_jitter > 0 and p.loss_p > 0 for p in ps)


def test_churn_workers_crash_and_rejoin_later() -> None:
    sc = make_scenario("churn", 8, seed=0)
    crashing = [p for p in sc.profiles.values() if p.crash_at is not None]
    assert len(crashing) == 2
    for p in crashing:
        assert p.rejoin_at is not None and p.crash_at is not None
        assert not p.alive_at((p.crash_at + p.rejoin_at) / 2)
        assert p.alive_at(p.rejoin_at + 1.0) and p.alive_at(0.0)


def test_interference_hits_at_about_its_probability() -> None:
    # Prepare
    p = WorkerProfile(compute_jitter=0.0, interference_p=0.1, interference_factor=5.0)
    rng = np.random.default_rng(0)
    # Execute
    times = np.array([p.sample_compute(rng) for _ in range(5000)])
    # Assert
    slow = np.isclose(times, 0.5)
    assert np.all(slow | np.isclose(times, 0.1))
    assert 0.08 < slow.mean() < 0.12


def test_lossy_link_loses_some_messages_and_delays_the_rest() -> None:
    p = WorkerProfile(link_delay=0.01, link_jitter=0.02, loss_p=0.2)
    rng = np.random.default_rng(0)
    draws = [p.sample_link(rng) for _ in range(2000)]
    lost = sum(d is None for d in draws)
    delays = [d for d in draws if d is not None]
    assert 300 < lost < 500
    assert min(delays) >= 0.01 and np.mean(delays) > 0.02


def test_bad_profiles_and_names_are_rejected() -> None:
    with pytest.raises(ValueError):
        WorkerProfile(compute_time=0.0)
    with pytest.raises(ValueError):
        WorkerProfile(loss_p=1.0)
    with pytest.raises(ValueError):
        WorkerProfile(link_delay=float("nan"))
    with pytest.raises(ValueError):
        WorkerProfile(rejoin_at=5.0)
    with pytest.raises(ValueError, match="unknown scenario"):
        make_scenario("storm", 8)
    with pytest.raises(ValueError):
        make_scenario("mixed", 0)
