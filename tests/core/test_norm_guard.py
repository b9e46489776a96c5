"""Bounded influence: outsized updates are clipped, never refused; pure logic, then
inside the core, where unusable pushes still answer the barrier."""

from __future__ import annotations

import statistics

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.norm_guard import NormGuard
from edgeps.core.server import MAX_REFUSED_IN_ROW
from edgeps.core.types import Applied, WorkerLeft
from edgeps.policy import parse_policy

from tests.core.test_server import Worker, reasons, released_version


def test_the_prior_bounds_the_first_pushes_until_the_window_fills() -> None:
    guard = NormGuard(10, window=64, warmup=8, prior=2.0)
    assert guard.limit() == pytest.approx(20.0)  # in force from the first push
    for _ in range(3):
        guard.accept(1.0)
    assert guard.limit() == pytest.approx(20.0)  # 3 known, 5 priors: median 2
    for _ in range(5):
        guard.accept(1.0)
    assert guard.limit() == pytest.approx(10.0)  # the prior no longer counts


def test_clips_above_k_times_the_median_and_counts_it() -> None:
    # Prepare
    guard = NormGuard(10, window=64, warmup=8)
    for n in (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0):
        guard.accept(n)

    # Execute / Assert: median of the eight is 4.5, one outlier does not move it
    assert guard.median() == pytest.approx(4.5)
    assert guard.clip_scale(45.0) == 1.0
    assert guard.clip_scale(90.0) == pytest.approx(0.5)
    assert guard.clipped == 1


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
    assert guard.clip_scale(50.0) < 1.0


def test_a_zero_median_sets_no_limit() -> None:
    guard = NormGuard(10, warmup=2)
    guard.accept(0.0)
    guard.accept(0.0)
    assert guard.limit() is None and guard.clip_scale(5.0) == 1.0


@pytest.mark.parametrize(
    "kw",
    [
        {"k": 1.0},
        {"k": 0},
        {"k": float("nan")},
        {"window": 0},
        {"warmup": 65},
        {"prior": 0.0},
        {"prior": float("inf")},
    ],
)
def test_bad_settings_are_refused(kw: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        NormGuard(**kw)  # type: ignore[arg-type]


def test_accept_refuses_a_non_finite_norm() -> None:
    with pytest.raises(ValueError):
        NormGuard().accept(float("inf"))


def guarded(policy: str = "asp", n: int = 3) -> ParameterServer:
    return ParameterServer(
        np.zeros(n, np.float32),
        policy=parse_policy(policy),
        lr=0.1,
        norm_guard=NormGuard(10, window=64, warmup=8),
    )


def test_core_clips_an_outsized_push_instead_of_refusing_it() -> None:
    # Prepare: asp, two workers, eight ordinary pushes (norm sqrt(3)) applied
    ps = guarded()
    a, b = Worker(ps, "a"), Worker(ps, "b")
    for i in range(4):
        a.push(1.0 + i)
        b.push(1.0 + i)
    _, before = ps.params_snapshot()
    bound = 10 * float(np.sqrt(3.0))

    # Execute: one finite push 10^4 times the usual size, then an ordinary one
    acts = b.push(10.0, np.full(3, 1e4, np.float32))
    after_big = ps.params_snapshot()[1]
    ok = b.push(11.0)

    # Assert: applied, moved by exactly lr x the bound, nothing refused
    assert any(isinstance(x, Applied) for x in acts) and reasons(acts) == []
    moved = float(np.linalg.norm(after_big - before))
    assert moved == pytest.approx(0.1 * bound, rel=1e-4)
    assert any(isinstance(x, Applied) for x in ok)
    assert ps.stats()["b"].rejected == {}
    assert ps.model.clipped == 1


def test_the_first_push_of_a_run_is_bounded_too() -> None:
    # Prepare: nothing applied yet; the initial parameters are zero (prior 1.0)
    ps = guarded()
    a = Worker(ps, "a")

    # Execute: a first push 10^15 times the usual size
    acts = a.push(1.0, np.full(3, 1e15, np.float32))

    # Assert: applied, moved by at most lr x k x the prior
    assert any(isinstance(x, Applied) for x in acts)
    assert float(np.linalg.norm(ps.params_snapshot()[1])) <= 0.1 * 10 * 1.0 + 1e-6


def test_a_non_finite_push_answers_the_bsp_barrier() -> None:
    # Prepare: BSP, two workers; a pushed its clock 1 and waits for b
    ps = guarded("bsp")
    a, b = Worker(ps, "a"), Worker(ps, "b")
    held = a.push(1.0)
    assert released_version(held, "a") is None

    # Execute: b's push of clock 1 is unusable
    acts = b.push(1.5, np.full(3, np.nan, np.float32))

    # Assert: refused, nothing applied, and the round closes: both released
    assert reasons(acts) == ["non_finite"]
    assert released_version(acts, "a") == 1 and released_version(acts, "b") == 1
    assert ps.stats()["b"].rejected == {"non_finite": 1}


def test_a_worker_refused_turn_after_turn_leaves_the_job() -> None:
    # Prepare: asp, one honest and one broken worker
    ps = guarded()
    a, b = Worker(ps, "a"), Worker(ps, "b")
    a.push(1.0)

    # Execute: b pushes NaN every turn
    left = []
    for i in range(MAX_REFUSED_IN_ROW):
        acts = b.push(2.0 + i, np.full(3, np.nan, np.float32))
        left += [x for x in acts if isinstance(x, WorkerLeft)]

    # Assert: it leaves with a reason on its last refused turn, not before
    assert left == [WorkerLeft("b", "refused")]
    assert ps.worker_state("b") is not None and not ps.view.is_live("b")
    assert any(isinstance(x, Applied) for x in a.push(20.0))


def test_refused_pushes_never_lock_a_worker_out_of_its_seq_window() -> None:
    # Prepare: a push far ahead but inside the window, refused as non-finite
    ps = guarded()
    a = Worker(ps, "a")
    a.seq += 60
    a.push(1.0, np.full(3, np.nan, np.float32))

    # Execute: the next push, 61 past the last applied one
    acts = a.push(2.0)

    # Assert: the window runs from the last decided push
    assert any(isinstance(x, Applied) for x in acts), reasons(acts)


def test_without_a_guard_the_core_applies_any_finite_push() -> None:
    ps = ParameterServer(np.zeros(3, np.float32), policy=parse_policy("asp"))
    a = Worker(ps, "a")
    for i in range(8):
        a.push(1.0 + i)
    acts = a.push(10.0, np.full(3, 1e4, np.float32))
    assert any(isinstance(x, Applied) for x in acts)
