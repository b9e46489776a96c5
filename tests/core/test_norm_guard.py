"""The default guard against outsized updates: pure logic, then inside the core."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.norm_guard import NormGuard
from edgeps.core.types import Applied, Rejected
from edgeps.policy import parse_policy

from tests.core.test_server import Worker, reasons, released_version


def test_no_limit_while_warming_up() -> None:
    guard = NormGuard(10, window=64, warmup=8)
    for _ in range(7):
        guard.accept(1.0)
    assert guard.limit() is None
    assert guard.admits(1e9)
    guard.accept(1.0)
    assert guard.limit() == pytest.approx(10.0)


def test_refuses_above_k_times_the_median_and_counts_it() -> None:
    # Prepare
    guard = NormGuard(10, window=64, warmup=8)
    for n in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0):
        guard.accept(n)

    # Execute / Assert: median of the eight is 4.5, one outlier does not move it
    assert guard.median() == pytest.approx(4.5)
    assert guard.admits(45.0)
    assert not guard.admits(45.01)
    assert guard.refused == 1


def test_median_is_over_the_last_window_only() -> None:
    # Prepare: large norms early in training, then small ones
    rng = np.random.default_rng(3)
    norms = list(rng.uniform(50, 100, 100)) + list(rng.uniform(0.5, 1.5, 64))
    guard = NormGuard(10, window=64, warmup=8)

    # Execute
    for n in norms:
        guard.accept(float(n))

    # Assert: the early large norms have left the window
    assert len(guard) == 64
    assert guard.median() == pytest.approx(statistics.median(norms[-64:]))
    assert not guard.admits(50.0)


def test_a_zero_median_sets_no_limit() -> None:
    guard = NormGuard(10, warmup=2)
    guard.accept(0.0)
    guard.accept(0.0)
    assert guard.limit() is None and guard.admits(5.0)


@pytest.mark.parametrize(
    "kw",
    [{"k": 1.0}, {"k": 0}, {"k": float("nan")}, {"window": 0}, {"warmup": 65}],
)
def test_bad_settings_are_refused(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        NormGuard(**kw)  # type: ignore[arg-type]


def test_accept_refuses_a_non_finite_norm() -> None:
    with pytest.raises(ValueError):
        NormGuard().accept(float("inf"))


def test_core_refuses_an_outsized_push_and_keeps_the_parameters() -> None:
    # Prepare: asp, two workers, eight ordinary pushes applied
    ps = ParameterServer(
        np.zeros(3, np.float32),
        policy=parse_policy("asp"),
        norm_guard=NormGuard(10, window=64, warmup=8),
    )
    a, b = Worker(ps, "a"), Worker(ps, "b")
    for i in range(4):
        a.push(1.0 + i)
        b.push(1.0 + i)
    version, before = ps.params_snapshot()

    # Execute: one finite push 10^4 times the usual size, then an ordinary one
    acts = b.push(10.0, np.full(3, 1e4, np.float32))
    after_bad = ps.params_snapshot()[1]
    ok = b.push(11.0)

    # Assert
    assert reasons(acts) == ["norm"]
    assert released_version(acts, "b") == version  # resynced, not left hanging
    assert np.array_equal(after_bad, before)
    assert any(isinstance(x, Applied) for x in ok)
    assert not any(isinstance(x, Rejected) for x in ok)
    assert ps.stats()["b"].rejected == {"norm": 1}
    assert ps.norm_guard is not None and ps.norm_guard.refused == 1


def test_without_a_guard_the_core_applies_any_finite_push() -> None:
    ps = ParameterServer(np.zeros(3, np.float32), policy=parse_policy("asp"))
    a = Worker(ps, "a")
    for i in range(8):
        a.push(1.0 + i)
    acts = a.push(10.0, np.full(3, 1e4, np.float32))
    assert any(isinstance(x, Applied) for x in acts)
