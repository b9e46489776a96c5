"""A competitor's burst schedule: when it runs, how much work it leaves, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.workloads.bursts import Bursts, parse_bursts
from edgeps.workloads.scenarios import WorkerProfile, make_scenario


def test_bursts_start_every_period_at_the_phase_and_last_burst_seconds() -> None:
    b = Bursts(burst=2.0, period=6.0, share=0.8, phase=1.0)
    on = [t for t in np.arange(0.0, 18.0, 0.25) if b.in_burst(float(t))]
    assert on == [t for t in np.arange(0.0, 18.0, 0.25) if (t - 1.0) % 6.0 < 2.0]
    assert b.in_burst(1.0) and b.in_burst(2.99) and not b.in_burst(3.0)
    assert not b.in_burst(0.99) and b.in_burst(7.5) and not b.in_burst(9.5)
    assert b.intervals(0.0, 14.0) == [(1.0, 3.0), (7.0, 9.0), (13.0, 14.0)]
    assert b.intervals(2.0, 8.0) == [(2.0, 3.0), (7.0, 8.0)]


def test_overlap_counts_burst_seconds_in_any_window() -> None:
    b = Bursts(burst=2.0, period=6.0, share=0.5, phase=1.0)
    assert b.overlap(0.0, 6.0) == pytest.approx(2.0)
    assert b.overlap(2.0, 8.0) == pytest.approx(2.0)
    assert b.overlap(0.0, 60.0) == pytest.approx(20.0)
    assert b.overlap(-6.0, 0.0) == pytest.approx(2.0)  # periodic before 0 too
    assert b.overlap(3.0, 7.0) == 0.0 and b.overlap(5.0, 4.0) == 0.0
    grid = np.linspace(0.0, 30.0, 300_001)
    assert b.overlap(0.0, 30.0) == pytest.approx(
        np.mean([b.in_burst(float(t)) for t in grid[::10]]) * 30.0, abs=0.01
    )


def test_compute_runs_at_one_minus_share_inside_a_burst_and_full_speed_outside() -> (
    None
):
    b = Bursts(burst=2.0, period=6.0, share=0.75, phase=1.0)
    assert b.slowdown == pytest.approx(4.0)
    assert b.stretch(3.0, 1.0) == pytest.approx(1.0)  # all outside
    assert b.stretch(1.0, 0.25) == pytest.approx(1.0)  # all inside: 4x
    # starts 0.5 s before a burst: 0.5 s at full speed, then 0.5 s of work at
    # a quarter speed takes 2 s, the whole burst
    assert b.stretch(0.5, 1.0) == pytest.approx(2.5)
    # a long computation: each period gives 6 - 0.75 * 2 = 4.5 s of work
    assert b.stretch(1.0, 45.0) == pytest.approx(60.0)
    assert b.mean_slowdown == pytest.approx(6.0 / 4.5)


@pytest.mark.parametrize("start", [0.0, 0.3, 1.7, 2.9, 5.99, 13.2])
@pytest.mark.parametrize("seconds", [0.01, 0.4, 1.3, 7.0, 25.0])
def test_stretch_inverts_work_and_composes(start: float, seconds: float) -> None:
    b = Bursts(burst=1.5, period=4.0, share=0.6, phase=0.7)
    took = b.stretch(start, seconds)
    assert b.work(start, start + took) == pytest.approx(seconds)
    half = b.stretch(start, seconds / 2)
    assert half + b.stretch(start + half, seconds / 2) == pytest.approx(took)
    assert seconds <= took <= seconds * b.slowdown + 1e-9


def test_no_share_or_always_on_degenerate_cleanly() -> None:
    assert Bursts(1.0, 5.0, 0.0).stretch(0.3, 2.0) == 2.0
    always = Bursts(burst=3.0, period=3.0, share=0.5)
    assert always.in_burst(2.999) and always.in_burst(100.0)
    assert always.stretch(7.1, 2.0) == pytest.approx(4.0)


def test_seeded_schedules_repeat_for_a_seed_and_differ_across_seeds() -> None:
    a = Bursts.seeded(2.0, 6.0, 0.8, seed=3)
    assert a == Bursts.seeded(2.0, 6.0, 0.8, seed=3)
    phases = {Bursts.seeded(2.0, 6.0, 0.8, seed=s).phase for s in range(8)}
    assert len(phases) == 8 and all(0.0 <= p < 6.0 for p in phases)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"burst": 0.0, "period": 6.0, "share": 0.5}, ValueError),
        ({"burst": 7.0, "period": 6.0, "share": 0.5}, ValueError),
        ({"burst": 2.0, "period": 6.0, "share": 1.0}, ValueError),
        ({"burst": 2.0, "period": 6.0, "share": -0.1}, ValueError),
        ({"burst": 2.0, "period": 6.0, "share": 0.5, "phase": 6.0}, ValueError),
        ({"burst": float("nan"), "period": 6.0, "share": 0.5}, ValueError),
        ({"burst": "2", "period": 6.0, "share": 0.5}, TypeError),
    ],
)
def test_bad_schedules_are_refused(kwargs: dict, error: type) -> None:
    with pytest.raises(error):
        Bursts(**kwargs)


def test_parse_bursts_reads_key_values_and_names_a_bad_part() -> None:
    assert parse_bursts("burst=2, period=6,share=0.8") == {
        "burst": 2.0,
        "period": 6.0,
        "share": 0.8,
    }
    assert parse_bursts("") == {}
    with pytest.raises(ValueError, match="key=value"):
        parse_bursts("burst")
    with pytest.raises(ValueError, match="share must be a number"):
        parse_bursts("share=lots")


def test_disturbed_scenario_disturbs_one_board_by_default_chosen_by_seed() -> None:
    sc = make_scenario("disturbed", 8, seed=1)
    hit = [w for w, p in sc.profiles.items() if p.bursts is not None]
    assert len(hit) == 1
    b = sc.profiles[hit[0]].bursts
    assert b is not None and (b.burst, b.period, b.share) == (2.0, 6.0, 0.8)
    assert b == Bursts.seeded(2.0, 6.0, 0.8, seed=1)  # lab.disturb's phase too
    assert sc == make_scenario("disturbed", 8, seed=1)
    picks = {
        frozenset(
            w
            for w, p in make_scenario("disturbed", 8, seed=s).profiles.items()
            if p.bursts
        )
        for s in range(8)
    }
    assert len(picks) > 1
    others = [p for w, p in sc.profiles.items() if w not in hit]
    assert all(p == WorkerProfile() for p in others)


def test_disturbed_scenario_takes_its_parameters_in_the_name() -> None:
    sc = make_scenario("disturbed:burst=1,period=4,share=0.5,workers=3", 8, seed=0)
    hit = [p.bursts for p in sc.profiles.values() if p.bursts is not None]
    assert len(hit) == 3
    assert {(b.burst, b.period, b.share) for b in hit} == {(1.0, 4.0, 0.5)}
    assert "3 of 8" in sc.description and "share 0.5" in sc.description
    for bad in (
        "disturbed:workers=9",
        "disturbed:workers=1.5",
        "disturbed:workers=inf",
        "disturbed:workers=nan",
        "disturbed:speed=2",
        "disturbed:share=1",
        "stragglers:share=0.5",
    ):
        with pytest.raises(ValueError):
            make_scenario(bad, 8, seed=0)


def test_a_profiles_stretch_follows_its_bursts_and_is_identity_without() -> None:
    b = Bursts(burst=2.0, period=6.0, share=0.75, phase=1.0)
    assert WorkerProfile(bursts=b).stretch(1.0, 0.25) == pytest.approx(1.0)
    assert WorkerProfile().stretch(1.0, 0.25) == 0.25
    with pytest.raises(TypeError):
        WorkerProfile(bursts=(2.0, 6.0, 0.75))  # type: ignore[arg-type]
