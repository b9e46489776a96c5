"""A CPython worker's local rounds and the job's card, against numpy references."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps import kernels
from edgeps.kernels import ModelSpec
from edgeps.pyworker import local_round
from edgeps.pyworker.localdata import LocalData
from edgeps.pyworker.trainer import EmulatedTrainer, NativeTrainer

SPEC = "mlp:4-6-3"


def _data(n: int = 60, seed: int = 0, classes=None) -> LocalData:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).astype(np.float32)
    y = (np.arange(n) % 3).astype(np.int32)
    return LocalData(X, y, "test", classes)


def _trainer(**kw) -> NativeTrainer:
    t = NativeTrainer(SPEC, _data(**kw), batch=8, seed=3)
    t.params[:] = ModelSpec.parse(SPEC).init_params(1)
    return t


def test_a_round_of_h_steps_pushes_the_delta_of_h_sgd_steps() -> None:
    # Prepare: a twin trainer steps by hand, the same batches in the same order
    t, ref = _trainer(), _trainer()
    start = t.params.copy()

    # Execute
    loss, samples, steps, delta = t.local_round(5, 0.0, 0.0, 0.1)

    # Assert
    losses = []
    for _ in range(5):
        lo, _, _ = ref.step()
        losses.append(lo)
        ref.params -= np.float32(0.1) * ref.grad
    want = start - ref.params
    got = np.frombuffer(delta, dtype="<f4")
    np.testing.assert_array_equal(got, want)
    assert (samples, steps) == (40, 5)
    assert loss == pytest.approx(float(np.mean(losses)))


def test_a_round_of_one_step_is_exactly_todays_gradient() -> None:
    # Prepare
    t, ref = _trainer(), _trainer()
    params = t.params.copy()

    # Execute
    _, samples, steps, grad = t.local_round(1, 0.0, 0.0, 0.1)
    _, _, want = ref.step()

    # Assert: the gradient itself (steps 1), the parameters untouched
    assert (samples, steps) == (8, 1)
    assert bytes(grad) == bytes(want)
    np.testing.assert_array_equal(t.params, params)


@pytest.mark.parametrize(
    ("epochs", "rows", "batch", "want"),
    [(1.0, 60, 8, 8), (0.5, 60, 8, 4), (2.0, 10, 8, 3), (0.0, 60, 8, 7)],
)
def test_epochs_plan_the_steps_of_a_round(epochs, rows, batch, want) -> None:
    assert local_round.plan(7, epochs, rows, batch) == want


def test_a_time_budget_takes_steps_until_it_is_spent() -> None:
    # Prepare: a clock that moves 1 s per reading
    t = _trainer()
    ticks = iter(range(100))

    # Execute: readings 0 (start), 1, 2, 3 -> 3 s spent after the third step
    _, _, steps, _ = local_round.run(t, 1, 0.0, 3.0, 0.1, clock=lambda: next(ticks))

    # Assert
    assert steps == 3


def test_the_jobs_scaler_replaces_the_workers_own() -> None:
    # Prepare: a worker that scaled its data itself (--scale)
    raw = _data()
    own = LocalData(raw.X * 2, raw.y, "test", raw_X=raw.X)
    t = NativeTrainer(SPEC, own, batch=8)
    offset = np.array([1, 2, 3, 4], dtype="<f4")
    inv = np.array([0.5, 0.25, 2, 1], dtype="<f4")

    # Execute
    t.set_scale(offset.tobytes() + inv.tobytes())
    scaled = t.X.copy()
    t.set_scale(None)

    # Assert: the job's applies to the raw rows; without one, the worker's own
    np.testing.assert_allclose(scaled, (raw.X - offset) * inv, rtol=1e-6)
    np.testing.assert_array_equal(t.X, own.X)
    with pytest.raises(ValueError, match="scaler"):
        t.set_scale(offset.tobytes())


def test_text_labels_are_renumbered_to_the_jobs_classes() -> None:
    # Prepare: local ids 0, 1, 2 name b, c, a
    t = NativeTrainer(SPEC, _data(classes=("b", "c", "a")), batch=8)
    before = t.y.copy()

    # Execute
    t.set_classes(b"a\nb\nc")

    # Assert
    np.testing.assert_array_equal(t.y, np.array([1, 2, 0])[before])
    assert t.classes == ("a", "b", "c")
    with pytest.raises(ValueError, match="not among the job's classes"):
        NativeTrainer(SPEC, _data(classes=("b", "c", "z")), batch=8).set_classes(
            b"a\nb\nc"
        )


def test_moments_are_the_raw_datas() -> None:
    # Prepare
    data = _data()

    # Execute
    rows, mean, var = NativeTrainer(SPEC, data, batch=8).moments()

    # Assert
    assert rows == 60
    np.testing.assert_allclose(mean, data.X.astype(np.float64).mean(axis=0))
    np.testing.assert_allclose(var, data.X.astype(np.float64).var(axis=0))


class _Profile:
    max_batch = 0

    def sample_compute(self, rng, batch):
        return 0.5


def test_an_emulated_round_lasts_its_steps_emulated_time() -> None:
    # Prepare
    slept: list[float] = []
    t = EmulatedTrainer(_trainer(), _Profile(), np.random.default_rng(0), slept.append)

    # Execute
    _, _, steps, _ = t.local_round(4, 0.0, 0.0, 0.1)
    _, _, timed, _ = t.local_round(1, 0.0, 1.2, 0.1)

    # Assert: 4 x 0.5 s; then steps of 0.5 s until 1.2 s are spent: 3
    assert steps == 4 and timed == 3
    assert sum(slept) == pytest.approx(2.0 + 1.5, abs=0.2)


def test_the_numpy_and_kernel_steps_agree() -> None:
    # a guard on the reference above: step() is kernels.loss_and_grad
    t = _trainer()
    params = t.params.copy()
    _, _, g = t.step()
    _, want = kernels.loss_and_grad(ModelSpec.parse(SPEC), params, t.Xb, t.yb)
    np.testing.assert_allclose(np.frombuffer(g, dtype="<f4"), want, rtol=1e-6)
