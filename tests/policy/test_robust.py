"""Byzantine-robust combination of a round: against numpy, and inside the core."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.types import Join, Push, Release
from edgeps.policy import parse_policy
from edgeps.policy.robust import combine, parse_rule


def test_each_rule_matches_its_numpy_reference() -> None:
    rng = np.random.default_rng(7)
    deltas = [rng.standard_normal(6).astype(np.float32) for _ in range(7)]
    weights = [float(w) for w in rng.integers(1, 40, 7)]
    stack = np.stack(deltas).astype(np.float64)

    mean = combine(deltas, weights, "mean")
    median = combine(deltas, weights, "median")
    trimmed = combine(deltas, weights, "trim", 0.2)

    w = np.asarray(weights)
    assert np.allclose(mean, (w[:, None] * stack).sum(0) / w.sum(), atol=1e-6)
    assert np.allclose(median, np.median(stack, axis=0), atol=1e-6)
    # 7 values, 20% trimmed: floor(1.4) = 1 dropped at each end
    assert np.allclose(trimmed, np.sort(stack, axis=0)[1:6].mean(axis=0), atol=1e-6)


def test_a_tiny_round_still_gives_a_step() -> None:
    one = [np.ones(3, np.float32)]
    assert np.array_equal(combine(one, [1.0], "trim", 0.4), one[0])
    two = [np.zeros(3, np.float32), np.full(3, 2, np.float32)]
    assert np.array_equal(combine(two, [1.0, 1.0], "trim", 0.49), np.ones(3))


@pytest.mark.parametrize("text", ["max", "trim:0.5", "trim:0", "trim:x", ""])
def test_unknown_rules_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rule(text)


def run_round(policy: str, updates: list[np.ndarray], samples: list[int]) -> np.ndarray:
    """One round of ``policy`` over zeros: each worker pushes its update once."""
    ps = ParameterServer(
        np.zeros(updates[0].size, np.float32), policy=parse_policy(policy), lr=1.0
    )
    ids = [f"w{i}" for i in range(len(updates))]
    for wid in ids:
        ps.handle(Join(wid), 0.0)
    for i, (wid, u) in enumerate(zip(ids, updates, strict=True)):
        push = Push(wid, 1, 0, 0, u, 0.1, samples[i], steps=2)  # a delta
        acts = ps.handle(push, 1.0 + i)
    assert any(isinstance(a, Release) for a in acts)
    return ps.params_snapshot()[1]


def test_the_median_round_ignores_one_hostile_update_the_mean_does_not() -> None:
    # Prepare: four honest deltas near 1, one hostile -50 claiming many samples
    honest = [np.full(4, v, np.float32) for v in (0.9, 1.0, 1.1, 1.0)]
    hostile = np.full(4, -50.0, np.float32)
    updates, samples = [*honest, hostile], [32, 32, 32, 32, 10_000]

    # Execute
    mean = run_round("fedavg:agg=mean", updates, samples)
    default = run_round("fedavg", updates, samples)
    median = run_round("fedavg:agg=median", updates, samples)
    trimmed = run_round("fedavg:agg=trim:0.2", updates, samples)

    # Assert: params move by -delta (the server applies the pseudo-gradient)
    assert np.allclose(median, -1.0)
    assert np.allclose(trimmed, -1.0, atol=0.04)
    assert np.allclose(default, -1.0, atol=0.04)  # trim:0.25 is the default
    assert float(mean[0]) > 10.0  # dragged the other way by the hostile one
