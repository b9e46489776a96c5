"""PerformanceMonitor: robust typical times and classification on crafted timings."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from edgeps.core.monitor import PerformanceMonitor
from hypothesis import given, settings
from hypothesis import strategies as st


def feed(
    mon: PerformanceMonitor, wid: str, times: list[float], start: float = 0.0
) -> None:
    now = start
    for t in times:
        now += t
        mon.observe(
            wid, compute_time=0.8 * t, comm_time=0.2 * t, iteration_time=t, now=now
        )


def test_transient_spike_is_flagged_but_barely_moves_the_typical_time() -> None:
    mon = PerformanceMonitor()
    feed(mon, "a", [1.0] * 10)
    feed(mon, "a", [10.0])
    spiked = mon.classify("a")
    typical = mon.typical_iteration("a")
    feed(mon, "a", [1.0])
    assert spiked == "transient" and typical < 1.1
    assert mon.classify("a") == "normal"


def test_persistent_slowdown_moves_the_typical_time_within_a_few_iterations() -> None:
    mon = PerformanceMonitor(persistent_window=3)
    feed(mon, "a", [1.0] * 10)
    feed(mon, "a", [4.0] * 3)
    assert mon.typical_iteration("a") == pytest.approx(4.0)


def test_speedup_is_followed_too() -> None:
    mon = PerformanceMonitor()
    feed(mon, "a", [2.0] * 10 + [0.5] * 3)
    assert mon.typical_iteration("a") == pytest.approx(0.5)
    assert mon.speed("a") == pytest.approx(2.0)


def test_jitter_is_normal() -> None:
    rng = np.random.default_rng(7)
    mon = PerformanceMonitor()
    flags = []
    for t in rng.uniform(0.8, 1.2, size=200):
        feed(mon, "a", [float(t)])
        flags.append(mon.classify("a"))
    assert flags.count("transient") == 0
    assert 0.9 < mon.typical_iteration("a") < 1.1


def test_persistently_slow_worker_is_classified_against_the_cluster_median() -> None:
    mon = PerformanceMonitor(slow_factor=1.5)
    for wid in "abcd":
        feed(mon, wid, [1.0] * 6)
    feed(mon, "slow", [3.0] * 6)
    classes = {w: mon.classify(w) for w in ["a", "b", "c", "d", "slow"]}
    assert classes == {"a": "normal", "b": "normal", "c": "normal", "d": "normal",
                       "slow": "persistent"}  # fmt: skip
    assert mon.persistent_ids(["a", "b", "slow"]) == {"slow"}


def test_a_spike_does_not_make_a_worker_persistent() -> None:
    mon = PerformanceMonitor()
    for wid in "abc":
        feed(mon, wid, [1.0] * 6)
    feed(mon, "a", [20.0])
    assert mon.classify("a") == "transient"
    assert mon.persistent_ids(["a", "b", "c"]) == set()


def test_classification_is_normal_during_warmup_and_for_unknown_workers() -> None:
    mon = PerformanceMonitor(warmup=3)
    feed(mon, "a", [1.0])
    feed(mon, "b", [9.0])
    assert mon.classify("b") == "normal" and mon.classify("nobody") == "normal"
    assert math.isnan(mon.typical_iteration("nobody"))


def test_snapshot_is_json_able() -> None:
    mon = PerformanceMonitor()
    feed(mon, "a", [1.0, 1.0, 1.0])
    feed(mon, "b", [0.0])
    snap = json.loads(json.dumps(mon.snapshot(), allow_nan=False))
    assert snap["workers"]["a"]["iteration_mean"] == pytest.approx(1.0)
    assert snap["workers"]["b"]["speed"] is None  # inf is not JSON
    assert not mon.known("c") and mon.known("b")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"compute_time": -1.0},
        {"comm_time": math.nan},
        {"iteration_time": math.inf},
        {"now": math.nan},
    ],  # fmt: skip
)
def test_observe_rejects_bad_numbers(kwargs: dict) -> None:
    args = {"compute_time": 1.0, "comm_time": 0.0, "iteration_time": 1.0, "now": 1.0}
    with pytest.raises(ValueError):
        PerformanceMonitor().observe("a", **(args | kwargs))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"alpha": 0.0},
        {"transient_factor": -1},
        {"persistent_window": 0},
        {"slow_factor": 1.0},
        {"warmup": 0},
    ],  # fmt: skip
)
def test_constructor_rejects_bad_settings(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        PerformanceMonitor(**kwargs)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    level=st.floats(0.01, 100.0),
    jitter=st.floats(0.0, 0.2),
    spike=st.floats(1.0, 1e4),
    seed=st.integers(0, 2**16),
)
def test_any_single_spike_moves_the_typical_time_by_a_bounded_amount(
    level: float, jitter: float, spike: float, seed: int
) -> None:
    # Prepare: a worker with a steady history around `level`
    rng = np.random.default_rng(seed)
    mon = PerformanceMonitor()
    feed(mon, "a", list(level * (1 + jitter * rng.uniform(-1, 1, size=20))))
    before = mon.typical_iteration("a")
    # Execute
    feed(mon, "a", [level * spike])
    # Assert: at most alpha * band, however large the spike
    assert (
        mon.typical_iteration("a") <= before * (1 + 0.2 * 3 * max(jitter, 0.1)) + 1e-9
    )


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    level=st.floats(0.01, 100.0), factor=st.floats(2.0, 50.0), window=st.integers(1, 5)
)
def test_a_lasting_change_is_adopted_after_window_samples(
    level: float, factor: float, window: int
) -> None:
    # Prepare
    mon = PerformanceMonitor(persistent_window=window)
    feed(mon, "a", [level] * 10)
    # Execute
    feed(mon, "a", [level * factor] * window)
    # Assert
    assert mon.typical_iteration("a") == pytest.approx(level * factor)


def test_overdue_once_a_running_iteration_leaves_the_normal_band() -> None:
    mon = PerformanceMonitor()
    feed(mon, "a", [1.0] * 5)
    assert not mon.overdue("a", 1.2)
    assert mon.overdue("a", 2.0)
    assert not mon.overdue("nobody", 100.0)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(0.01, 5.0), min_size=0, max_size=6), min_size=1, max_size=12
    ),
    st.integers(0, 11),
)
def test_classes_answer_as_classify_does_for_each_worker(
    series: list[list[float]], skip: int
) -> None:
    m = PerformanceMonitor(warmup=2)
    for i, times in enumerate(series):
        for t in times:
            m.observe(f"w{i}", compute_time=t, comm_time=0.0, iteration_time=t, now=0.0)
    ids = [f"w{i}" for i in range(len(series)) if i != skip] + ["never"]
    assert m.classes(ids) == {w: m.classify(w, ids) for w in ids}
    every = m.classes()
    assert every == {w: m.classify(w) for w in every}
    assert {w: row["class"] for w, row in m.snapshot()["workers"].items()} == every
