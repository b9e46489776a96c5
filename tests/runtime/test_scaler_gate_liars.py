"""Workers that lie about their data cannot decide the job's scaler."""

from __future__ import annotations

import numpy as np
from edgeps.core.types import Join
from edgeps.model.scaler import Scaler
from edgeps.runtime.scaler_gate import ScalerGate, robust_merge

NF = 3
SCALE, SHIFT = np.array([1.0, 50.0, 0.1]), np.array([0.0, 300.0, -7.0])


def _rows(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, NF)) * SCALE + SHIFT


def _moments(X: np.ndarray) -> tuple[int, list[float], list[float]]:
    return int(X.shape[0]), X.mean(axis=0).tolist(), X.var(axis=0).tolist()


def _honest(n: int = 4) -> dict[str, np.ndarray]:
    return {f"w{i}": _rows(i, 1000) for i in range(n)}


def _truth(shards: dict[str, np.ndarray]) -> Scaler:
    return Scaler.fit(np.concatenate(list(shards.values())))


def _close(got: Scaler, want: Scaler, stds: float = 0.1) -> bool:
    """Means within ``stds`` true stds, stds within 10%."""
    near = np.abs(got.mean - want.mean) <= stds * want.std
    return bool(np.all(near) and np.allclose(got.std, want.std, rtol=0.1))


def _fix(gate: ScalerGate, hellos: list[tuple[str, object]], t0: float = 0.0) -> None:
    for i, (wid, moments) in enumerate(hellos):
        gate.hold(Join(wid, session=1, nonce=1), moments, now=t0 + 0.1 * i)
    assert gate.admit(t0 + 0.1 * len(hellos) + gate.grace) is not None


def test_a_huge_row_count_with_shifted_means_moves_nothing() -> None:
    # Prepare: 4 honest workers and one claiming 2^32-1 rows, mean +5 std
    shards = _honest()
    truth = _truth(shards)
    lie = (2**32 - 1, (truth.mean + 5 * truth.std).tolist(), np.square(truth.std))
    gate = ScalerGate(NF, workers=4)
    # Execute
    _fix(gate, [("evil", lie), *((w, _moments(x)) for w, x in shards.items())])
    # Assert: the liar is left out and counted
    assert gate.fixed is not None and _close(gate.fixed, truth)
    assert gate.outliers == ["evil"]
    assert gate.report()["refused"] == {"evil": {"moments_outlier": 1}}


def test_a_huge_row_count_with_true_looking_moments_weighs_two_shards() -> None:
    shards = _honest()
    truth = _truth(shards)
    lie = (2**32 - 1, (truth.mean + 2 * truth.std).tolist(), np.square(truth.std))
    parts = {w: (1000, x.mean(0), x.var(0)) for w, x in shards.items()}
    parts["evil"] = (lie[0], np.asarray(lie[1]), lie[2])
    # Execute
    total, outliers = robust_merge(parts)
    # Assert: kept (within 4 std), but its rows count as 2000, not 4e9
    assert outliers == [] and total.n == 4000 + 2000
    assert np.all(np.abs(total.mean - truth.mean) <= 0.7 * truth.std)


def test_huge_variance_is_left_out() -> None:
    shards = _honest()
    lie = (2**32 - 1, [0.0] * NF, [3e38] * NF)
    gate = ScalerGate(NF, workers=2)
    _fix(gate, [("evil", lie), *((w, _moments(x)) for w, x in shards.items())])
    assert gate.fixed is not None and _close(gate.fixed, _truth(shards))
    assert gate.outliers == ["evil"]


def test_two_made_up_ids_first_do_not_fix_the_scaler_alone() -> None:
    # Prepare: the default K = 2; two sybils answer first, honest ones in the grace
    shards = _honest()
    truth = _truth(shards)
    lie = (1000, (truth.mean + 5 * truth.std).tolist(), np.square(truth.std))
    gate = ScalerGate(NF, workers=2, wait=30.0)
    gate.hold(Join("evil", nonce=1), lie, now=0.0)
    gate.hold(Join("evil2", nonce=1), lie, now=0.1)
    # Execute: K reached, but the grace is not over
    early = gate.admit(0.2)
    for i, (w, x) in enumerate(shards.items()):
        gate.hold(Join(w, nonce=1), _moments(x), now=1.0 + i)
    joins = gate.admit(0.1 + gate.grace)
    # Assert
    assert early is None and gate.grace == 5.0
    assert joins is not None and len(joins) == 6
    assert gate.fixed is not None and _close(gate.fixed, truth)
    assert sorted(gate.outliers) == ["evil", "evil2"]


def test_honest_skewed_shards_are_all_kept() -> None:
    # Prepare: each shard one region of the data (sorted by its first feature)
    X = _rows(9, 4000)
    X = X[np.argsort(X[:, 0])]
    shards = {f"w{i}": X[i * 500 : (i + 1) * 500] for i in range(8)}
    parts = {w: (len(x), x.mean(0), x.var(0)) for w, x in shards.items()}
    # Execute
    total, outliers = robust_merge(parts)
    # Assert: nobody left out, every row counted
    assert outliers == [] and total.n == 4000
    assert _close(total, Scaler.fit(X), stds=1e-6)
