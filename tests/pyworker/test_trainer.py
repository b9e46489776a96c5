"""The CPython trainer: gradients equal edgeps.kernels on the same batch."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps import kernels
from edgeps.kernels import ModelSpec
from edgeps.pyworker.localdata import LocalData
from edgeps.pyworker.trainer import EmulatedTrainer, NativeTrainer


def _data(n: int, f: int, classes: int, seed: int = 0, linear: bool = False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f)).astype(np.float32)
    if linear:
        y = rng.normal(size=n).astype(np.float32)
    else:
        y = rng.integers(0, classes, size=n).astype(np.int32)
    return LocalData(X, y, "test")


@pytest.mark.parametrize(
    ("spec", "classes", "linear"),
    [
        ("linear:5", 0, True),
        ("logistic:5", 2, False),
        ("softmax:5x4", 4, False),
        ("mlp:5-8-3", 3, False),
        ("mlp:5-6-4-3:tanh", 3, False),
    ],
)
def test_step_gradient_equals_kernels_on_the_same_batch(
    spec: str, classes: int, linear: bool
) -> None:
    # Prepare
    data = _data(50, 5, classes, linear=linear)
    t = NativeTrainer(spec, data, batch=8, seed=1)
    t.params[:] = ModelSpec.parse(spec).init_params(3)
    for _ in range(3):
        # Execute
        loss, samples, grad = t.step()
        Xb, yb = t.Xb.copy(), t.yb.copy()
        ref_loss, ref_grad = kernels.loss_and_grad(t.spec, t.params.copy(), Xb, yb)
        # Assert
        assert samples == 8
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        got = np.frombuffer(grad, dtype="<f4")
        np.testing.assert_allclose(got, ref_grad, rtol=1e-5, atol=1e-6)
        kernels.sgd_step(t.params, got.copy(), 0.1)


def test_batches_follow_a_seeded_shuffle_and_cover_each_epoch() -> None:
    # Prepare
    data = LocalData(
        np.arange(10, dtype=np.float32).reshape(10, 1),
        np.zeros(10, dtype=np.int32),
        "t",
    )
    a = NativeTrainer("logistic:1", data, batch=4, seed=5)
    b = NativeTrainer("logistic:1", data, batch=4, seed=5)
    c = NativeTrainer("logistic:1", data, batch=4, seed=6)
    # Execute
    seen_a = [a.next_batch()[0][:, 0].copy() for _ in range(5)]  # 20 = 2 epochs
    seen_b = [b.next_batch()[0][:, 0].copy() for _ in range(5)]
    seen_c = [c.next_batch()[0][:, 0].copy() for _ in range(5)]
    # Assert
    flat = np.concatenate(seen_a)
    assert np.array_equal(flat, np.concatenate(seen_b))
    assert not np.array_equal(flat, np.concatenate(seen_c))
    assert sorted(flat[:10].tolist()) == list(range(10))
    assert sorted(flat[10:].tolist()) == list(range(10))
    assert a.epochs == 2


def test_buffers_are_reused_across_steps() -> None:
    # Prepare
    t = NativeTrainer("softmax:5x3", _data(40, 5, 3), batch=16)
    buf = t.params_buffer()
    _, _, g1 = t.step()
    # Execute
    _, _, g2 = t.step()
    # Assert
    assert t.params_buffer() is buf
    assert np.shares_memory(np.frombuffer(g1, "<f4"), np.frombuffer(g2, "<f4"))
    assert buf.dtype == np.float32 and buf.size == t.n_params
    assert t.model == "softmax:5x3"


def test_batch_larger_than_data_is_capped() -> None:
    t = NativeTrainer("softmax:5x3", _data(6, 5, 3), batch=64)
    _, samples, _ = t.step()
    assert samples == 6


def test_set_params_checks_the_length() -> None:
    t = NativeTrainer("softmax:5x3", _data(6, 5, 3))
    values = np.arange(t.n_params, dtype="<f4")
    t.set_params(values.tobytes())
    assert np.array_equal(t.params, values)
    with pytest.raises(ValueError, match="bytes"):
        t.set_params(values[:-1].tobytes())


def test_feature_count_mismatch_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="5 features but model"):
        NativeTrainer("softmax:6x3", _data(10, 5, 3))


def test_labels_outside_the_model_classes_are_refused() -> None:
    with pytest.raises(ValueError, match="labels span"):
        NativeTrainer("softmax:5x2", _data(30, 5, 3))
    with pytest.raises(ValueError, match="whole-number"):
        NativeTrainer("logistic:5", _data(30, 5, 0, linear=True))


@pytest.mark.parametrize("batch", [0, -1, 2.5, True])
def test_bad_batch_sizes_are_refused(batch: object) -> None:
    with pytest.raises(ValueError):
        NativeTrainer("softmax:5x3", _data(10, 5, 3), batch=batch)  # type: ignore[arg-type]


class FixedProfile:
    """Every iteration should take exactly ``seconds``."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def sample_compute(self, rng: np.random.Generator, batch: int = 32) -> float:
        return self.seconds


def test_emulated_trainer_sleeps_the_rest_of_the_drawn_time() -> None:
    # Prepare
    slept: list[float] = []
    inner = NativeTrainer("softmax:5x3", _data(20, 5, 3), batch=4)
    t = EmulatedTrainer(
        inner, FixedProfile(0.5), np.random.default_rng(0), sleep=slept.append
    )
    # Execute
    loss, samples, grad = t.step()
    # Assert
    assert len(slept) == 1 and 0.4 < slept[0] <= 0.5
    assert samples == 4 and t.n_params == inner.n_params and t.model == inner.model
    assert t.params_buffer() is inner.params_buffer()
    assert np.array_equal(np.frombuffer(grad, "<f4"), inner.grad)


def test_emulated_trainer_never_sleeps_when_compute_is_slower() -> None:
    slept: list[float] = []
    inner = NativeTrainer("softmax:5x3", _data(20, 5, 3), batch=4)
    t = EmulatedTrainer(
        inner, FixedProfile(0.0), np.random.default_rng(0), slept.append
    )
    t.step()
    assert slept == []


def test_set_batch_changes_the_samples_per_step_within_the_shard() -> None:
    # Prepare
    t = NativeTrainer("softmax:5x3", _data(20, 5, 3), batch=4)
    # Execute / Assert: a release's batch, then one larger than the shard
    t.set_batch(6)
    _, samples, _ = t.step()
    assert samples == 6 and t.Xb.shape == (6, 5)
    t.set_batch(50)
    _, samples, _ = t.step()
    assert samples == 20
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError):
            t.set_batch(bad)  # type: ignore[arg-type]
    assert t.batch == 20


def test_emulated_compute_is_drawn_at_the_trainer_batch_as_the_simulator_does() -> None:
    # Prepare: the scenarios' profile, whose time grows with the batch
    from edgeps.workloads.scenarios import WorkerProfile

    profile = WorkerProfile(compute_time=0.2, compute_jitter=0.0)
    slept: list[float] = []
    inner = NativeTrainer("softmax:5x3", _data(200, 5, 3), batch=32)
    t = EmulatedTrainer(inner, profile, np.random.default_rng(0), sleep=slept.append)
    # Execute: a release asks for 128 samples through the worker's set_batch
    t.set_batch(128)
    _, samples, _ = t.step()
    # Assert: the sleep fills the time of a 128-sample step, not a 32-sample one
    want = profile.sample_compute(np.random.default_rng(0), 128)
    assert samples == 128 and inner.batch == 128
    assert want > profile.sample_compute(np.random.default_rng(0), 32) * 3
    assert want * 0.5 < t.slept <= want


def test_a_small_shard_steps_for_the_asked_batch_time() -> None:
    # Prepare: 10 local samples, batch 32 asked (hundreds of sensors on one
    # dataset): the board would still run a 32-sample step's time
    from edgeps.workloads.scenarios import WorkerProfile

    profile = WorkerProfile(compute_time=0.2, compute_jitter=0.0)
    slept: list[float] = []
    inner = NativeTrainer("softmax:5x3", _data(10, 5, 3), batch=32)
    t = EmulatedTrainer(inner, profile, np.random.default_rng(0), sleep=slept.append)
    # Execute
    _, samples, _ = t.step()
    # Assert: 10 samples computed, the time of the asked 32 slept
    want = profile.sample_compute(np.random.default_rng(0), 32)
    assert samples == 10 and inner.batch == 10
    assert want * 0.5 < slept[0] <= want
