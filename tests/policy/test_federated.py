"""FedAvg, FedBuff and FedAsync against numpy written out plainly."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.types import Join, Leave, Push, Rejected, Release, Tick
from edgeps.policy import parse_policy

P0 = np.array([1.0, -2.0, 0.5, 3.0], np.float32)


def server(policy: str, n: int, **kw: object) -> ParameterServer:
    ps = ParameterServer(P0, policy=parse_policy(policy), lr=0.1, **kw)  # type: ignore[arg-type]
    for i in range(n):
        ps.handle(Join(f"w{i}", session=1), 0.0)
    return ps


def push(wid: str, clock: int, base: int, delta: np.ndarray, **kw: object) -> Push:
    return Push(wid, clock, clock, base, delta, session=1, **kw)  # type: ignore[arg-type]


def params(ps: ParameterServer) -> np.ndarray:
    return ps.params_snapshot()[1]


def deltas(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=4).astype(np.float32) for _ in range(n)]


def released(actions: list[object]) -> set[str]:
    return {w for a in actions if isinstance(a, Release) for w in a.worker_ids}


# ---- FedAvg --------------------------------------------------------------


def test_fedavg_applies_the_sample_weighted_mean_once_the_round_is_in() -> None:
    ps, ds, samples = server("fedavg", 3), deltas(3), [32, 96, 64]
    for i in range(2):
        out = ps.handle(push(f"w{i}", 1, 0, ds[i], samples=samples[i], steps=4), 1.0)
        assert not released(out) and ps.version == 0
        assert np.array_equal(params(ps), P0)
    out = ps.handle(push("w2", 1, 0, ds[2], samples=samples[2], steps=4), 1.0)
    want = (
        P0
        - sum(n * d.astype(np.float64) for n, d in zip(samples, ds, strict=True)) / 192
    )
    assert np.allclose(params(ps), want, atol=1e-6)
    assert released(out) == {"w0", "w1", "w2"} and ps.version == 1


def test_fedavg_of_gradients_is_one_step_of_the_mean_gradient_at_the_job_lr() -> None:
    ps, gs = server("fedavg", 2), deltas(2, seed=1)
    for i in range(2):
        ps.handle(push(f"w{i}", 1, 0, gs[i], samples=32), 1.0)
    assert np.allclose(params(ps), P0 - 0.1 * (gs[0] + gs[1]) / 2, atol=1e-6)


@pytest.mark.parametrize("n", [1, 4, 64, 512])
def test_more_workers_never_make_a_larger_fedavg_step(n: int) -> None:
    ps, d = server("fedavg", n), np.full(4, 0.25, np.float32)
    for i in range(n):
        ps.handle(push(f"w{i}", 1, 0, d, samples=32, steps=8), 1.0)
    assert np.allclose(params(ps), P0 - d, atol=1e-6)


def test_fedavg_first_k_closes_the_round_and_drops_the_late() -> None:
    ps, ds = server("fedavg:k=2", 3), deltas(3, seed=2)
    ps.handle(push("w0", 1, 0, ds[0], samples=10, steps=2), 1.0)
    out = ps.handle(push("w1", 1, 0, ds[1], samples=30, steps=2), 1.2)
    assert released(out) == {"w0", "w1"}
    want = P0 - (10 * ds[0] + 30 * ds[1]) / 40
    assert np.allclose(params(ps), want, atol=1e-6)
    out = ps.handle(push("w2", 1, 0, ds[2], samples=10, steps=2), 1.5)
    assert any(isinstance(a, Rejected) and a.reason == "too_stale" for a in out)
    assert released(out) == {"w2"}  # resynced with the round's parameters
    assert np.allclose(params(ps), want, atol=1e-6)


def test_fedavg_deadline_closes_the_round_with_what_is_in() -> None:
    ps, ds = server("fedavg:deadline=2", 3), deltas(2, seed=3)
    ps.handle(push("w0", 1, 0, ds[0], samples=8, steps=2), 0.5)
    ps.handle(push("w1", 1, 0, ds[1], samples=24, steps=2), 1.0)
    assert not released(ps.handle(Tick(), 1.9)) and ps.version == 0
    out = ps.handle(Tick(), 2.1)
    assert released(out) == {"w0", "w1"} and ps.version == 1
    assert np.allclose(params(ps), P0 - (8 * ds[0] + 24 * ds[1]) / 32, atol=1e-6)


def test_fedavg_a_leaver_closes_the_round_it_held_open() -> None:
    ps, ds = server("fedavg", 2), deltas(1, seed=4)
    ps.handle(push("w0", 1, 0, ds[0], samples=8, steps=2), 0.5)
    out = ps.handle(Leave("w1"), 0.6)
    assert released(out) == {"w0"}
    assert np.allclose(params(ps), P0 - ds[0], atol=1e-6)


# ---- FedBuff -------------------------------------------------------------


def test_fedbuff_applies_the_staleness_weighted_mean_of_every_k() -> None:
    ps, ds = server("fedbuff:k=2", 3), deltas(5, seed=5)
    ref = P0.astype(np.float64)
    # (worker, clock, base version): staleness is counted in aggregates applied
    plan = [("w0", 1, 0), ("w1", 1, 0), ("w2", 1, 0), ("w0", 2, 1), ("w1", 2, 0)]
    buf, count, version = np.zeros(4), 0, 0
    for (wid, clock, base), d in zip(plan, ds, strict=True):
        out = ps.handle(push(wid, clock, base, d, samples=32, steps=3), 1.0)
        assert released(out) == {wid}  # nobody waits
        buf += d / np.sqrt(1 + (version - base))
        count += 1
        if count == 2:
            ref, buf, count, version = ref - buf / 2, np.zeros(4), 0, version + 1
        assert ps.version == version
        assert np.allclose(params(ps), ref, atol=1e-6)
    assert count == 1  # the fifth waits in the buffer


def test_fedbuff_goes_through_the_server_lr() -> None:
    ps, ds = server("fedbuff:k=1", 1, server_lr=0.5), deltas(1, seed=6)
    ps.handle(push("w0", 1, 0, ds[0], steps=2), 1.0)
    assert np.allclose(params(ps), P0 - 0.5 * ds[0], atol=1e-6)


# ---- FedAsync ------------------------------------------------------------


def test_fedasync_mixes_each_delta_with_a_staleness_decayed_weight() -> None:
    ps, ds = server("fedasync:a=0.5", 2), deltas(3, seed=7)
    ref = P0.astype(np.float64)
    for version, ((wid, clock, base), d) in enumerate(
        zip([("w0", 1, 0), ("w1", 1, 0), ("w0", 2, 1)], ds, strict=True)
    ):
        ps.handle(push(wid, clock, base, d, steps=5), 1.0)
        ref = ref - 0.5 * (1 + version - base) ** -0.5 * d
        assert ps.version == version + 1
        assert np.allclose(params(ps), ref, atol=1e-6)


@pytest.mark.parametrize(
    "text", ["fedavg:k=0", "fedavg:deadline=0", "fedbuff:k=0", "fedasync:a=2"]
)
def test_bad_options_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_policy(text)
