"""Local DP on the CPython worker: what leaves it is the clipped, noisy gradient."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.cli import build_parser
from edgeps.commands.worker import local_dp
from edgeps.core.privacy import privatize
from edgeps.kernels import ModelSpec
from edgeps.pyworker.local_dp import LocalDP
from edgeps.pyworker.localdata import LocalData
from edgeps.pyworker.trainer import NativeTrainer
from edgeps_worker import codec


def _data() -> LocalData:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 5)).astype(np.float32) * 5.0
    y = rng.integers(0, 3, size=64).astype(np.int32)
    return LocalData(X, y, "test")


def _trainers(clip: float, noise: float) -> tuple[NativeTrainer, NativeTrainer]:
    spec = "softmax:5x3"
    plain = NativeTrainer(spec, _data(), batch=8, seed=1)
    noisy = NativeTrainer(
        spec, _data(), batch=8, seed=1, local_dp=LocalDP(clip, noise, seed=5)
    )
    for t in (plain, noisy):
        t.params[:] = ModelSpec.parse(spec).init_params(2)
    return plain, noisy


def test_each_step_sends_the_privatized_gradient() -> None:
    plain, noisy = _trainers(0.5, 1.0)
    rng = np.random.default_rng(5)
    for _ in range(3):
        plain.step()
        _, samples, body = noisy.step()
        want, _ = privatize(plain.gradient(), 0.5, 1.0, rng)
        assert samples == 8
        assert np.array_equal(np.frombuffer(body, np.float32), want)
        assert np.array_equal(noisy.gradient(), want)
    assert noisy.local_dp is not None and noisy.local_dp.updates == 3


def test_the_encoded_update_is_the_noisy_one() -> None:
    _, noisy = _trainers(0.5, 1.0)
    noisy.step()
    body = bytes(noisy.encode_grad(codec.F32))
    assert np.array_equal(np.frombuffer(body, "<f4"), noisy.gradient())


def test_without_noise_the_gradient_is_clipped_to_c() -> None:
    plain, clipped = _trainers(0.01, 0.0)
    plain.step()
    clipped.step()
    g, c = plain.gradient(), clipped.gradient()
    assert np.linalg.norm(g) > 0.01
    assert np.linalg.norm(c) == pytest.approx(0.01, rel=1e-5)
    assert np.allclose(c / np.linalg.norm(c), g / np.linalg.norm(g), atol=1e-6)


def test_the_worker_flags_turn_it_on() -> None:
    need = ["--broker", "mqtt://127.0.0.1:1", "--job", "j", "--id", "w1", "--emulated"]
    need.append("sensors")
    off = build_parser("worker").parse_args(["worker", *need])
    assert local_dp(off) is None
    on = build_parser("worker").parse_args(
        ["worker", *need, "--dp-clip", "2", "--dp-noise", "0.7"]
    )
    dp = local_dp(on)
    assert isinstance(dp, LocalDP) and (dp.clip, dp.noise) == (2.0, 0.7)
    with pytest.raises(ValueError, match="--dp-clip"):
        LocalDP(0.0, 1.0)
