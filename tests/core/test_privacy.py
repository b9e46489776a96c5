"""DP in the core: clip to C, noise N(0, (sigma C)^2), and off changes nothing."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from edgeps.core.model_step import ModelStep
from edgeps.core.privacy import DPMechanism, check_dp, dp_mechanism, privatize
from edgeps.core.server import ParameterServer
from edgeps.core.types import Join, Push
from edgeps.policy import parse_policy


def _push(wid: str, update: np.ndarray, steps: int = 0) -> Push:
    return Push(wid, 1, 1, 0, update, samples=32, session=1, steps=steps)


def test_an_update_above_the_clip_is_scaled_to_it_and_one_below_is_kept() -> None:
    rng = np.random.default_rng(0)
    big = np.full(16, 3.0, np.float32)  # norm 12
    out, clipped = privatize(big, 2.0, 0.0, rng)
    assert clipped and np.linalg.norm(out) == pytest.approx(2.0, rel=1e-6)
    assert np.allclose(out / np.linalg.norm(out), big / np.linalg.norm(big))
    small = np.full(16, 0.1, np.float32)
    out, clipped = privatize(small, 2.0, 0.0, rng)
    assert not clipped and np.array_equal(out, small)
    assert out is not small and out.dtype == np.float32


def test_the_noise_is_a_numpy_gaussian_of_sigma_times_c_with_the_seed() -> None:
    update = np.linspace(-1, 1, 1000).astype(np.float32)  # norm ~18.3: clipped
    clip, sigma = 0.5, 1.5
    out, _ = privatize(update, clip, sigma, np.random.default_rng(42))
    ref = update.astype(np.float64)
    ref = ref * (clip / np.linalg.norm(ref))
    ref = ref + np.random.default_rng(42).normal(0.0, sigma * clip, size=ref.shape)
    assert np.array_equal(out, ref.astype(np.float32))
    # and the noise has the scale it claims
    noise = out.astype(np.float64) - update * (clip / np.linalg.norm(update))
    assert np.std(noise) == pytest.approx(sigma * clip, rel=0.1)


def test_a_seeded_mechanism_is_reproducible() -> None:
    g = np.ones(64, np.float32)
    a = DPMechanism(1.0, 1.0, seed=3)
    b = DPMechanism(1.0, 1.0, seed=3)
    assert all(np.array_equal(a.apply(g, "w"), b.apply(g, "w")) for _ in range(3))
    assert not np.array_equal(
        DPMechanism(1.0, 1.0, seed=4).apply(g, "w"), b.apply(g, "w")
    )


def test_the_mechanism_counts_updates_by_sampling_rate_and_worker() -> None:
    mech = DPMechanism(1.0, 1.0, rates={"a": 0.25, "b": 2.0})  # clamped to 1
    g = np.ones(4, np.float32)
    for wid in ("a", "a", "b", "c"):
        mech.apply(g, wid)
    assert mech.steps == 4
    assert mech.steps_by_rate == {0.25: 2, 1.0: 2}
    assert mech.busiest_by_rate() == {0.25: 2, 1.0: 1}


def test_local_mode_counts_but_applies_the_update_as_sent() -> None:
    mech = DPMechanism(0.1, 5.0, mode="local")
    g = np.full(8, 4.0, np.float32)
    assert mech.apply(g, "w") is g and mech.steps == 1 and mech.clipped == 0


@pytest.mark.parametrize(
    ("mode", "clip", "noise"),
    [("on", 1.0, 1.0), ("central", 0.0, 1.0), ("central", 1.0, -0.1),
     ("local", float("nan"), 1.0), ("central", 1.0, float("inf"))],
)  # fmt: skip
def test_bad_settings_are_refused(mode: str, clip: float, noise: float) -> None:
    with pytest.raises(ValueError, match="--dp"):
        check_dp(mode, clip, noise)


def test_off_is_no_mechanism() -> None:
    assert dp_mechanism("off", 1.0, 1.0, seed=0) is None
    with pytest.raises(ValueError):
        DPMechanism(1.0, 1.0, mode="off")


def _run(policy: str, dp: DPMechanism | None, steps: int = 0) -> str:
    rng = np.random.default_rng(7)
    ps = ParameterServer(
        rng.normal(size=50).astype(np.float32),
        policy=parse_policy(policy),
        lr=0.05,
        dp=dp,
    )
    for i in range(4):
        ps.handle(Join(f"w{i}", session=1), 0.0)
    now = 0.0
    for t in range(1, 11):
        for i in range(4):
            now += 0.01
            g = rng.normal(size=50).astype(np.float32)
            push = Push(
                f"w{i}", t, t, ps.version, g, samples=32, session=1, steps=steps
            )
            ps.handle(push, now)
    return hashlib.sha256(ps.params_snapshot()[1].tobytes()).hexdigest()


@pytest.mark.parametrize(("policy", "steps"), [("asp", 0), ("asp", 4), ("fedavg", 0)])
def test_off_and_a_no_op_mechanism_give_the_same_bits(policy: str, steps: int) -> None:
    # a clip no update reaches and no noise: the very parameters of no DP at all
    off = _run(policy, None, steps)
    assert _run(policy, DPMechanism(1e9, 0.0), steps) == off
    assert _run(policy, DPMechanism(1e9, 0.0, mode="local"), steps) == off
    assert _run(policy, DPMechanism(1.0, 1.0, seed=1), steps) != off


@pytest.mark.parametrize(("policy", "steps"), [("asp", 0), ("asp", 4), ("fedavg", 0)])
def test_central_dp_noises_every_applied_update(policy: str, steps: int) -> None:
    mech = DPMechanism(1.0, 1.0, seed=1)
    _run(policy, mech, steps)
    assert mech.steps == 40  # every push of 4 workers x 10 clocks, each path
    assert mech.clipped > 0  # N(0, 1) gradients of 50 values: norm ~7 > 1


def test_the_step_applies_the_noisy_gradient() -> None:
    params = np.zeros(6, np.float32)
    mech = DPMechanism(1.0, 0.5, seed=9)
    model = ModelStep(params, lr=1.0, lr_workers=0, dp=mech)
    g = np.arange(6, dtype=np.float32)
    model.step_gradient(_push("w", g), 0, 1, 1.0)
    want, _ = privatize(g, 1.0, 0.5, np.random.default_rng(9))
    assert np.allclose(model.snapshot()[1], -want)
    delta, _ = ModelStep(params, dp=DPMechanism(1.0, 0.0)).delta_of(_push("w", g, 3))
    assert np.linalg.norm(delta) == pytest.approx(1.0, rel=1e-6)  # the delta clipped
