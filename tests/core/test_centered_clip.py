"""Centered clipping and the sample cap, written out against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core.centered_clip import CenteredClip
from edgeps.core.sample_cap import SampleCap
from edgeps.policy import parse_policy
from edgeps.policy.robust import DEFAULT_RULE


def _warm(cc: CenteredClip, n: int = 16, dim: int = 4) -> np.ndarray:
    """``n`` honest pushes of ones plus small noise; the pushes' mean."""
    rng = np.random.default_rng(0)
    pushes = [np.ones(dim) + rng.normal(0, 0.1, dim) for _ in range(n)]
    for i, u in enumerate(pushes):
        cc.clip(f"w{i % 4}", u.astype(np.float32))
    return np.mean(pushes, axis=0)


def test_during_the_warmup_every_push_is_applied_as_sent() -> None:
    cc = CenteredClip(warmup=4)
    u = np.full(3, 1e6, np.float32)
    assert cc.clip("a", u) is u and cc.limit("grad") is None


def test_a_push_far_from_the_reference_is_pulled_to_tau() -> None:
    # Prepare
    cc = CenteredClip(k=2.0, beta=0.9, warmup=16)
    _warm(cc)
    cc.clip("evil", np.ones(4, np.float32))  # near the fleet: a calm record
    tau = cc.limit("grad")
    ref = cc._kinds["grad"].ref.copy()
    u = np.full(4, -10.0, np.float32)
    # Execute
    out = cc.clip("evil", u)
    # Assert: ref + (u - ref) x tau / ||u - ref||
    assert tau is not None
    want = ref + (u - ref) * (tau / np.linalg.norm(u - ref))
    np.testing.assert_allclose(out, want, rtol=1e-5)
    assert cc.pulled == {"evil": 1}


def test_a_push_near_the_reference_is_the_same_array() -> None:
    cc = CenteredClip()
    _warm(cc)
    u = np.ones(4, np.float32)
    assert cc.clip("w0", u) is u


def test_a_worker_pulled_in_every_time_ends_weighed_zero() -> None:
    cc = CenteredClip()
    _warm(cc)
    rng = np.random.default_rng(1)
    outs = []
    for _ in range(150):  # 1 liar of 5
        for i in range(4):
            cc.clip(f"w{i}", (np.ones(4) + rng.normal(0, 0.1, 4)).astype(np.float32))
        outs.append(cc.clip("evil", np.full(4, -10.0, np.float32)))
    assert np.all(outs[-1] == 0.0) and cc.record["evil"] > 0.8
    # an honest push afterwards is still applied as sent
    u = np.ones(4, np.float32)
    assert cc.clip("w1", u) is u


def test_gradients_and_deltas_are_kept_apart() -> None:
    cc = CenteredClip(warmup=1)
    cc.clip("a", np.ones(2, np.float32), "grad")
    assert cc.limit("grad") is not None and cc.limit("delta") is None


@pytest.mark.parametrize("bad", [{"k": 0.0}, {"beta": 1.0}, {"warmup": 0}])
def test_bad_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        CenteredClip(**bad)  # type: ignore[arg-type]


def test_the_sample_cap_follows_the_lower_median() -> None:
    cap = SampleCap(k=4.0)
    assert cap.cap(32) == 32  # the first claim passes
    assert cap.cap(2**32 - 1) == 128  # 4 x the lower median of [32]
    assert cap.cap(64) == 64
    assert cap.cap(0) == 0 and cap.capped == 1


def test_fedavg_and_fedbuff_combine_robustly_by_default() -> None:
    assert DEFAULT_RULE == "trim:0.25"
    assert parse_policy("fedavg").agg == DEFAULT_RULE  # type: ignore[attr-defined]
    assert parse_policy("fedbuff:k=4").agg == DEFAULT_RULE  # type: ignore[attr-defined]
    assert parse_policy("fedbuff:k=4,agg=mean").describe() == "fedbuff:k=4,agg=mean"
    assert parse_policy("fedavg:agg=mean").describe() == "fedavg:agg=mean"


def test_a_worker_pulled_in_from_its_first_armed_push_weighs_zero_at_once() -> None:
    cc = CenteredClip()
    _warm(cc)
    out = cc.clip("evil", np.full(4, -10.0, np.float32))
    assert np.all(out == 0.0) and cc.weighed == {"evil": 1}
