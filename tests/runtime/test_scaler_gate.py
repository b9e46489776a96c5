"""The scaler from workers' moments: HELLOs held until it is fixed, combined exactly."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core.types import Join
from edgeps.model.scaler import Scaler
from edgeps.runtime.scaler_gate import MomentsRefused, ScalerGate, worker_part

NF = 3


def _moments(X: np.ndarray) -> tuple[int, list[float], list[float]]:
    """What a CPython worker's HELLO says of its data (pyworker.local_round)."""
    x = X.astype(np.float64)
    return int(x.shape[0]), x.mean(axis=0).tolist(), x.var(axis=0).tolist()


def _rows(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, NF)) * [1.0, 50.0, 0.1] + [0.0, 300.0, -7.0]


def _join(wid: str, nonce: int = 1) -> Join:
    return Join(wid, session=nonce * 1000 + 1, instance=7, nonce=nonce)


def test_k_workers_fix_the_scaler_of_all_their_rows() -> None:
    # Prepare
    fixed: list[Scaler] = []
    gate = ScalerGate(NF, workers=2, grace=0.0, wait=30.0, on_fixed=fixed.append)
    a, b = _rows(1, 40), _rows(2, 25)
    # Execute
    held_a = gate.hold(_join("a"), _moments(a), now=0.0)
    before = gate.admit(1.0)
    held_b = gate.hold(_join("b"), _moments(b), now=2.0)
    joins = gate.admit(2.0)
    # Assert
    assert held_a and held_b and before is None
    assert joins is not None and [j.worker_id for j in joins] == ["a", "b"]
    want = Scaler.fit(np.concatenate([a, b]))
    assert fixed == [gate.fixed] and gate.fixed is not None
    assert gate.fixed.n == 65
    np.testing.assert_allclose(gate.fixed.s1, want.s1, rtol=1e-9)
    np.testing.assert_allclose(gate.fixed.s2, want.s2, rtol=1e-9)
    np.testing.assert_allclose(gate.fixed.mean, want.mean, rtol=1e-9)
    np.testing.assert_allclose(gate.fixed.std, want.std, rtol=1e-9)
    assert gate.report()["workers"] == 2 and gate.report()["rows"] == 65


def test_once_fixed_nothing_is_held_and_the_scaler_never_changes() -> None:
    gate = ScalerGate(NF, workers=1, grace=0.0)
    gate.hold(_join("a"), _moments(_rows(1, 10)), now=0.0)
    assert gate.admit(0.0) is not None
    first = gate.fixed
    # Execute
    held = gate.hold(_join("b"), _moments(_rows(2, 99)), now=1.0)
    # Assert
    assert not held and not gate.waiting
    assert gate.fixed is first and gate.admit(2.0) is None


def test_with_fewer_workers_the_wait_fixes_it_and_boards_come_along() -> None:
    # Prepare
    gate = ScalerGate(NF, workers=3, wait=30.0)
    a = _rows(1, 20)
    gate.hold(_join("board"), None, now=0.0)  # a board sends no moments
    gate.hold(_join("a"), _moments(a), now=5.0)
    # Execute
    early = gate.admit(34.9)
    joins = gate.admit(35.0)
    # Assert
    assert early is None
    assert joins is not None and [j.worker_id for j in joins] == ["board", "a"]
    assert gate.fixed is not None and gate.fixed.n == 20 and gate.fixed_from == 1


def test_without_any_moments_nobody_is_welcomed() -> None:
    gate = ScalerGate(NF, workers=1, wait=1.0)
    gate.hold(_join("board-1"), None, now=0.0)
    gate.hold(_join("board-2"), None, now=0.0)
    assert gate.admit(1e6) is None and gate.waiting
    assert gate.report()["held"] == 2


def test_a_worker_counts_once_however_often_it_says_hello() -> None:
    # Prepare
    gate = ScalerGate(NF, workers=2)
    a = _rows(1, 10)
    # Execute
    gate.hold(_join("a", 1), _moments(a), now=0.0)
    gate.hold(_join("a", 1), _moments(a), now=15.0)  # its release timeout: again
    # Assert
    assert gate.admit(16.0) is None
    assert gate.report()["workers"] == 1 and gate.report()["held"] == 1


def test_a_rehello_while_held_keeps_its_place_with_its_latest_hello() -> None:
    # Prepare
    gate = ScalerGate(NF, workers=2, grace=0.0)
    a, b = _rows(1, 10), _rows(2, 12)
    a_again = _rows(3, 30)  # restarted on another file: its latest data counts
    gate.hold(_join("a", 1), _moments(a), now=0.0)
    gate.hold(_join("board"), None, now=1.0)
    gate.hold(_join("a", 2), _moments(a_again), now=2.0)  # a new link
    # Execute
    gate.hold(_join("b"), _moments(b), now=3.0)
    joins = gate.admit(3.0)
    # Assert
    assert joins is not None
    assert [(j.worker_id, j.nonce) for j in joins] == [
        ("a", 2),
        ("board", 1),
        ("b", 1),
    ]
    # a's 30 rows count as twice b's 12 (the cap of ``robust_merge``)
    assert gate.fixed is not None and gate.fixed.n == 24 + 12


def test_moments_of_another_feature_count_are_refused_and_charged() -> None:
    # Prepare
    gate = ScalerGate(NF, workers=1, wait=1.0)
    wrong = _moments(np.ones((5, NF + 1)))
    # Execute
    held = gate.hold(_join("w"), wrong, now=0.0)
    # Assert
    assert held  # it waits like a board
    assert gate.admit(100.0) is None
    assert gate.refused == {"w": {"moments_features": 1}}
    assert gate.report()["refused"] == {"w": {"moments_features": 1}}


@pytest.mark.parametrize(
    ("moments", "reason"),
    [
        ((0, [0.0] * NF, [1.0] * NF), "moments_rows"),
        ((5, [1e31, 0.0, 0.0], [1.0] * NF), "moments_value"),
        ((5, [0.0] * NF, [1.0, 1e61, 1.0]), "moments_value"),
        ((5, [float("nan"), 0.0, 0.0], [1.0] * NF), "moments_value"),
        ((5, [0.0] * NF, [-1.0, 1.0, 1.0]), "moments_value"),
        ((5, [0.0] * NF), "moments_malformed"),
        (("many", [0.0] * NF, [1.0] * NF), "moments_malformed"),
        ((2.5, [0.0] * NF, [1.0] * NF), "moments_malformed"),
        ((5, ["x"] * NF, [1.0] * NF), "moments_malformed"),
    ],
)
def test_absurd_moments_are_refused_with_a_reason(moments, reason) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MomentsRefused) as info:
        worker_part(moments, NF)
    assert info.value.reason == reason
    gate = ScalerGate(NF, workers=1)
    gate.hold(_join("w"), moments, now=0.0)  # never raises
    assert gate.refused["w"][reason] == 1 and gate.admit(1e3) is None


def test_refused_moments_replace_the_workers_earlier_ones() -> None:
    gate = ScalerGate(NF, workers=1, wait=1.0)
    gate.hold(_join("w", 1), _moments(_rows(1, 5)), now=0.0)
    gate.hold(_join("w", 2), (5, [0.0], [1.0]), now=0.5)  # its latest data
    assert gate.admit(10.0) is None


def test_a_held_worker_that_leaves_is_not_welcomed() -> None:
    # Prepare
    gate = ScalerGate(NF, workers=2, grace=0.0)
    gate.hold(_join("a", 1), _moments(_rows(1, 5)), now=0.0)
    gate.hold(_join("gone", 4), None, now=0.0)
    gate.hold(_join("stays", 5), None, now=0.0)
    # Execute
    gate.leave("gone", 4)
    gate.leave("stays", 99)  # the last will of an earlier link
    gate.hold(_join("b"), _moments(_rows(2, 5)), now=1.0)
    joins = gate.admit(1.0)
    # Assert
    assert joins is not None
    assert [j.worker_id for j in joins] == ["a", "stays", "b"]


def test_held_hellos_are_bounded() -> None:
    gate = ScalerGate(NF, workers=1, max_held=2)
    for i in range(5):
        gate.hold(_join(f"w{i}"), None, now=0.0)
    assert gate.report()["held"] == 2 and gate.held_full == 3


def test_worker_part_is_rows_sums_and_sums_of_squares() -> None:
    X = _rows(4, 17)
    part = worker_part(_moments(X), NF)
    want = Scaler.fit(X)
    assert part.n == 17
    np.testing.assert_allclose(part.s1, want.s1, rtol=1e-12)
    np.testing.assert_allclose(part.s2, want.s2, rtol=1e-12)
