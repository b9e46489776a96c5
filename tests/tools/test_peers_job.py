"""tools/peers: the job a peer framework runs is edgeps' job, sample for sample.

The exported shards are the emulator's split, and the peer's numpy training
(tools/peers/flower/flower_numpy.py, run under Flower) computes edgeps'
gradients, draws edgeps' minibatches and sleeps edgeps' compute times. No
Flower needed.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest
from edgeps import kernels
from edgeps.core.defaults import JOB
from edgeps.kernels import ModelSpec
from edgeps.lab.matrix.grid import Cell, config
from edgeps.pyworker.batches import Shuffle
from edgeps.pyworker.localdata import load_emulated
from edgeps.workloads import datasets
from edgeps.workloads.scenarios import make_scenario

from tests.helpers.peers import load_peer


@pytest.fixture(scope="module")
def export_job() -> ModuleType:
    return load_peer("peers_export_job", "export_job.py")


@pytest.fixture(scope="module")
def fnp() -> ModuleType:
    return load_peer("peers_flower_numpy", "flower/flower_numpy.py")


@pytest.fixture(scope="module")
def job(export_job: ModuleType) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = export_job.job_arrays(
        n_workers=8, scenario="stragglers", seed=2, local_steps=8
    )
    return arrays


def test_exported_shards_are_the_emulators_split(job: dict[str, np.ndarray]) -> None:
    # Prepare: the split computed independently from the datasets module
    ds = datasets.load_dataset("sensors", 2)
    parts = datasets.partition(ds.y_train, 8, "iid", 2)

    # Assert: every sensor holds the same rows as under `edgeps emulate --seed 2`
    for i in range(8):
        X, y = ds.shard(parts[i])
        emulated, _ = load_emulated(f"sensors:{i}/8", 2, "iid")
        np.testing.assert_array_equal(job[f"X_{i}"], X)
        np.testing.assert_array_equal(job[f"y_{i}"], y)
        np.testing.assert_array_equal(job[f"X_{i}"], emulated.X)
    rows = sum(len(job[f"y_{i}"]) for i in range(8))
    assert rows == len(ds.y_train)


def test_exported_job_is_serves_test_rows_model_and_weights(
    job: dict[str, np.ndarray],
) -> None:
    ds = datasets.load_dataset("sensors", 2)
    spec = ModelSpec.parse(ds.model_spec)
    np.testing.assert_array_equal(job["X_test"], ds.X_test)
    np.testing.assert_array_equal(job["y_test"], ds.y_test)
    np.testing.assert_array_equal(job["init"], spec.init_params(2))
    assert str(job["model"]) == str(spec)
    assert float(job["target"]) == 0.91
    assert int(job["local_steps"]) == 8
    # the lr `edgeps bench policies-broker` gives serve, the batch emulate takes
    cell = Cell("sensors", 8, "stragglers", False)
    assert float(job["lr"]) == config(cell, "fedavg", 2, 60.0).lr
    assert int(job["batch"]) == JOB.batch


def test_exported_compute_times_are_the_scenarios(job: dict[str, np.ndarray]) -> None:
    profiles = list(make_scenario("stragglers", 8, 2).profiles.values())
    assert list(job["typical"]) == [p.typical_compute for p in profiles]
    assert sorted(job["typical"])[-2:] == [0.4, 0.4]  # 2 of 8 are 4x slower
    assert list(job["shuffle_seed"]) == [2 + i for i in range(8)]


def test_numpy_mlp_matches_edgeps_kernels(
    fnp: ModuleType, job: dict[str, np.ndarray]
) -> None:
    # Prepare
    spec = ModelSpec.parse(str(job["model"]))
    mlp = fnp.Mlp(tuple(int(s) for s in job["sizes"]), str(job["activation"]))
    rng = np.random.default_rng(0)
    params = job["init"] + rng.normal(0, 0.05, spec.n_params).astype(np.float32)
    X, y = job["X_0"][:32], job["y_0"][:32]

    # Execute
    loss, grad = mlp.loss_and_grad(params, X, y)
    ref_loss, ref_grad = kernels.loss_and_grad(spec, params, X, y)

    # Assert
    assert mlp.n_params == spec.n_params
    assert loss == pytest.approx(float(ref_loss), rel=1e-5)
    np.testing.assert_allclose(grad, ref_grad, rtol=1e-4, atol=1e-6)
    acc = kernels.accuracy(spec, params, job["X_test"], job["y_test"])
    assert mlp.accuracy(params, job["X_test"], job["y_test"]) == pytest.approx(acc)


def test_peer_batches_are_edgeps_minibatch_order(fnp: ModuleType) -> None:
    ours, theirs = fnp.Shuffle(500, 7), Shuffle(500, 7)
    for size in (32, 32, 100, 400, 32):  # crossing epochs
        np.testing.assert_array_equal(ours.take(size), theirs.take(size))


def test_peer_compute_draws_are_the_profiles(fnp: ModuleType) -> None:
    profile = make_scenario("interference", 1, 0).profiles["w00"]
    compute = fnp.Compute(
        profile.typical_compute,
        profile.compute_jitter,
        profile.interference_p,
        profile.interference_factor,
    )
    a, b = np.random.default_rng([3, 1]), np.random.default_rng([3, 1])
    for _ in range(50):
        assert compute.sample(a, 32) == profile.sample_compute(b, 32)


def test_local_trainer_takes_h_sgd_steps_and_sleeps_the_rest(
    fnp: ModuleType, job: dict[str, np.ndarray]
) -> None:
    # Prepare: a clock that only the sleeps move
    spec = ModelSpec.parse(str(job["model"]))
    mlp = fnp.Mlp(tuple(int(s) for s in job["sizes"]))
    now = [0.0]
    trainer = fnp.LocalTrainer(
        mlp, job["X_3"], job["y_3"], batch=32, lr=0.1, shuffle_seed=5,
        compute=fnp.Compute(0.4, 0.0), compute_seed=[2, 3],
    )  # fmt: skip

    # Execute
    out = trainer.train(
        job["init"], 3, lambda: now[0], lambda s: now.__setitem__(0, now[0] + s)
    )

    # Assert: three SGD steps on edgeps' batches, 0.4 s each
    p = job["init"].copy()
    order = Shuffle(len(job["y_3"]), 5)
    for _ in range(3):
        idx = order.take(32)
        _, g = kernels.loss_and_grad(spec, p, job["X_3"][idx], job["y_3"][idx])
        p -= np.float32(0.1) * g
    np.testing.assert_allclose(out, p, rtol=1e-4, atol=1e-6)
    assert now[0] == pytest.approx(1.2)
