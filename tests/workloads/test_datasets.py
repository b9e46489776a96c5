"""Datasets: determinism, shapes, standardization, partitions, clear errors."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import pytest
from edgeps.workloads import datasets
from edgeps.workloads.datasets import (
    load_dataset,
    partition,
    partition_dirichlet,
    partition_iid,
    sensor_features,
    sensor_signals,
)


def test_sensors_is_deterministic_for_a_seed_and_differs_across_seeds() -> None:
    # Prepare / Execute
    a = load_dataset("sensors", seed=3)
    b = load_dataset("sensors", seed=3)
    c = load_dataset("sensors", seed=4)
    # Assert
    np.testing.assert_array_equal(a.X_train, b.X_train)
    np.testing.assert_array_equal(a.y_test, b.y_test)
    assert not np.array_equal(a.X_train[:50], c.X_train[:50])


def test_sensors_shapes_dtypes_and_spec() -> None:
    d = load_dataset("sensors", seed=0)
    assert d.X_train.dtype == np.float32 and d.y_train.dtype == np.int32
    assert d.X_train.flags.c_contiguous and d.X_test.flags.c_contiguous
    assert d.X_train.shape == (4000, d.n_features)
    assert d.X_test.shape == (1000, d.n_features)
    assert d.n_classes == 6
    assert set(np.unique(d.y_train)) == set(range(6))
    assert d.model_spec == f"mlp:{d.n_features}-32-6"


def test_training_features_are_standardized_with_train_statistics_only() -> None:
    d = load_dataset("sensors", seed=1)
    np.testing.assert_allclose(d.X_train.mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(d.X_train.std(axis=0), 1.0, atol=1e-3)
    # the test set is scaled with the training statistics, so it is close but not exact
    assert np.abs(d.X_test.mean(axis=0)).max() > 1e-5


def test_sensor_classes_are_learnable_but_not_trivial() -> None:
    # Prepare: a nearest-class-mean rule on the features, independent of the kernels
    d = load_dataset("sensors", seed=0)
    means = np.stack([d.X_train[d.y_train == k].mean(axis=0) for k in range(6)])
    # Execute
    dist = ((d.X_test[:, None, :] - means[None]) ** 2).sum(axis=2)
    acc = float((dist.argmin(axis=1) == d.y_test).mean())
    # Assert: well above chance (1/6), below perfect
    assert 0.5 < acc < 0.99


def test_sensor_features_reject_wrong_rank_and_signals_reject_bad_sizes() -> None:
    with pytest.raises(ValueError):
        sensor_features(np.zeros((4, 64), dtype=np.float32))
    with pytest.raises(ValueError):
        sensor_signals(0, seed=0)
    x, y = sensor_signals(10, seed=0, n_channels=2, n_samples=32)
    assert x.shape == (10, 2, 32) and y.shape == (10,)
    assert sensor_features(x).shape == (10, 2 * 10 + 1)


def test_unknown_dataset_and_bad_seed_give_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("imagenet")
    with pytest.raises(TypeError):
        load_dataset("sensors", seed="1")  # type: ignore[arg-type]


def test_sklearn_sets_load_with_their_own_specs() -> None:
    pytest.importorskip("sklearn")
    digits = load_dataset("digits", seed=0)
    cancer = load_dataset("breast_cancer", seed=0)
    assert digits.n_features == 64 and digits.n_classes == 10
    assert digits.model_spec == "mlp:64-32-10"
    assert cancer.model_spec == "logistic:30"
    assert set(np.unique(cancer.y_train)) == {0, 1}
    assert len(digits.y_train) + len(digits.y_test) == 1797


def test_missing_sklearn_gives_a_clear_value_error(monkeypatch: Any) -> None:
    # Prepare: make importing scikit-learn fail as if the extra were not installed
    real_import = builtins.__import__

    def no_sklearn(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("sklearn"):
            raise ImportError("No module named 'sklearn'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    # Execute / Assert
    with pytest.raises(ValueError, match="edgeps\\[datasets\\]"):
        datasets.load_dataset("digits")


def test_iid_partition_covers_every_row_once() -> None:
    shards = partition_iid(1003, 8, seed=0)
    joined = np.concatenate(shards)
    assert len(shards) == 8
    assert sorted(joined.tolist()) == list(range(1003))
    assert max(len(s) for s in shards) - min(len(s) for s in shards) <= 1


def test_dirichlet_partition_is_label_skewed_and_complete() -> None:
    # Prepare
    y = load_dataset("sensors", seed=0).y_train
    # Execute
    skewed = partition(y, 8, "dirichlet:0.1", seed=2)
    iid = partition(y, 8, "iid", seed=2)
    # Assert: every row once; label mix per worker far from the global one
    assert sorted(np.concatenate(skewed).tolist()) == list(range(len(y)))

    def top_share(shards: list[np.ndarray]) -> float:
        return float(np.mean([np.bincount(y[s]).max() / len(s) for s in shards]))

    assert top_share(skewed) > 0.5
    assert top_share(iid) < 0.3


def test_partition_rejects_bad_schemes_and_sizes() -> None:
    y = np.zeros(100, dtype=np.int32)
    with pytest.raises(ValueError):
        partition(y, 4, "zipf")
    with pytest.raises(ValueError):
        partition(y, 4, "dirichlet:abc")
    with pytest.raises(ValueError):
        partition_dirichlet(y, 4, alpha=-1.0, seed=0)
    with pytest.raises(ValueError):
        partition_iid(3, 8, seed=0)


def test_shard_returns_rows_and_rejects_out_of_range() -> None:
    d = load_dataset("sensors", seed=0)
    X, y = d.shard(np.array([0, 5, 7]))
    np.testing.assert_array_equal(X[1], d.X_train[5])
    assert y.dtype == np.int32 and X.flags.c_contiguous
    with pytest.raises(ValueError):
        d.shard(np.array([len(d.y_train)]))
