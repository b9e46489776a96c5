"""A push may be a delta: H = 1 is today's update bit for bit; H > 1 by the server."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from edgeps.core.norm_guard import NormGuard
from edgeps.core.server import ParameterServer
from edgeps.core.types import Join, Push
from edgeps.policy import parse_policy

# sha256 (first 16 hex) of the parameters after ``_pushes`` on the core as it
# was before pushes could be deltas (same sequence, same seeds)
BEFORE = {
    ("asp", "sgd", False): "76345cea5ebe16b5",
    ("asp", "momentum", False): "7f0c72aeb2bac751",
    ("asp", "adam", False): "76404ba9183c553c",
    ("dsp", "sgd", True): "2a5828ba23953bd3",
    ("ssp:2", "momentum", True): "72dac4e4e4979190",
}


def _pushes(
    policy: str, optimizer: str, aware: bool, steps: int | None, n: int = 20
) -> str:
    rng = np.random.default_rng(7)
    ps = ParameterServer(
        rng.normal(size=50).astype(np.float32),
        policy=parse_policy(policy),
        optimizer=optimizer,
        lr=0.05,
        lr_workers=4,
        staleness_aware=aware,
        norm_guard=NormGuard(3.0),
        centered=False,  # random gradients: centered clipping would pull them in
    )
    now = 0.0
    for i in range(n):
        ps.handle(Join(f"w{i}", session=1), now)
    clocks = dict.fromkeys(range(n), 0)
    for t in range(30):
        for i in range(n):
            now += 0.01
            clocks[i] += 1
            outsized = 5.0 if (t * n + i) % 17 == 0 else 1.0  # some get clipped
            g = rng.normal(size=50).astype(np.float32) * outsized
            kw = {} if steps is None else {"steps": steps}
            base = max(0, ps.version - i)
            push = Push(
                f"w{i}", clocks[i], clocks[i], base, g, samples=32, session=1, **kw
            )
            ps.handle(push, now)
    return hashlib.sha256(ps.params_snapshot()[1].tobytes()).hexdigest()[:16]


@pytest.mark.parametrize(("policy", "optimizer", "aware"), sorted(BEFORE))
@pytest.mark.parametrize("steps", [None, 0, 1])
def test_one_step_pushes_give_the_parameters_they_gave_before(
    policy: str, optimizer: str, aware: bool, steps: int | None
) -> None:
    assert _pushes(policy, optimizer, aware, steps) == BEFORE[policy, optimizer, aware]


def _server(policy: str = "asp", **kw: object) -> ParameterServer:
    ps = ParameterServer(np.ones(4, np.float32), policy=parse_policy(policy), **kw)  # type: ignore[arg-type]
    ps.handle(Join("w1", session=1), 0.0)
    return ps


def test_a_delta_at_server_lr_one_reproduces_the_local_training() -> None:
    ps = _server(lr=0.1, server_opt="sgd", server_lr=1.0)
    delta = np.array([0.5, -0.25, 0.0, 1.0], np.float32)
    ps.handle(Push("w1", 1, 1, 0, delta, samples=96, session=1, steps=3), 1.0)
    _, params = ps.params_snapshot()
    assert np.array_equal(params, np.ones(4, np.float32) - delta)
    assert ps.version == 1


def test_a_delta_goes_through_the_server_optimizer_at_the_server_lr() -> None:
    ps = _server(lr=0.1, server_opt="momentum", server_lr=0.5)
    delta = np.array([1.0, 2.0, -1.0, 0.0], np.float32)
    for seq in (1, 2):
        ps.handle(Push("w1", seq, seq, seq - 1, delta, session=1, steps=4), seq)
    # momentum 0.9: v1 = d, v2 = 0.9 d + d; params = 1 - 0.5 (v1 + v2)
    want = np.ones(4) - 0.5 * (delta + 1.9 * delta)
    assert np.allclose(ps.params_snapshot()[1], want, atol=1e-6)


def test_a_gradient_still_steps_by_the_job_lr_next_to_deltas() -> None:
    ps = _server(lr=0.1, server_lr=1.0)
    g = np.array([1.0, 1.0, 1.0, 1.0], np.float32)
    ps.handle(Push("w1", 1, 1, 0, g, session=1, steps=1), 1.0)
    assert np.allclose(ps.params_snapshot()[1], 1 - 0.1 * g)


def test_the_server_lr_must_be_positive() -> None:
    with pytest.raises(ValueError, match="server_lr"):
        _server(server_lr=0.0)
