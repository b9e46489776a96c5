"""Datasets that ship inside packages: sizes, shapes, dtypes, splits, determinism."""

from __future__ import annotations

import functools
import random

import numpy as np
import pytest
from edgeps.kernels import ModelSpec
from edgeps.workloads import packaged
from edgeps.workloads.datasets import Dataset, partition_groups
from edgeps.workloads.datasets import load_dataset as _load_dataset
from edgeps.workloads.packaged import FASHION_DIR

EXPECTED = {
    # name: (train, test, sample shape, classes)
    "mnist": (4000, 1000, (1, 28, 28), 10),
    "mnist1d": (4000, 1000, (1, 40), 10),
    "basicmotions": (40, 40, (6, 100), 4),
    "fashion-mnist": (60000, 10000, (1, 28, 28), 10),
}


@functools.cache
def load_dataset(name: str, seed: int) -> Dataset:
    return _load_dataset(name, seed)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_a_packaged_dataset_has_its_sizes_shape_and_conv_model(name: str) -> None:
    n_train, n_test, shape, n_classes = EXPECTED[name]

    ds = load_dataset(name, seed=0)

    width = int(np.prod(shape))
    assert ds.X_train.shape == (n_train, width) and ds.X_test.shape == (n_test, width)
    assert ds.X_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    assert ds.X_train.flags.c_contiguous and ds.X_test.flags.c_contiguous
    assert ds.shape == shape and ds.n_classes == n_classes
    assert set(np.unique(ds.y_test).tolist()) == set(range(n_classes))
    spec = ModelSpec.parse(ds.model_spec)
    assert spec.is_conv and spec.in_shape == shape and spec.n_classes == n_classes
    # standardised per channel by the training split
    channels = ds.X_train.reshape(n_train, shape[0], -1)
    assert np.allclose(channels.mean(axis=(0, 2)), 0.0, atol=1e-3)
    assert np.allclose(channels.std(axis=(0, 2)), 1.0, atol=1e-3)


@pytest.mark.parametrize("name", ["mnist", "mnist1d", "basicmotions"])
def test_a_packaged_dataset_is_the_same_for_a_seed(name: str) -> None:
    a, b = load_dataset(name, seed=3), load_dataset(name, seed=3)
    c = load_dataset(name, seed=4)

    assert np.array_equal(a.X_train, b.X_train) and np.array_equal(a.y_test, b.y_test)
    # the seed shuffles the training rows only: the held-out split is fixed
    assert not np.array_equal(a.y_train, c.y_train)
    assert np.array_equal(np.sort(a.y_train), np.sort(c.y_train))
    assert np.array_equal(a.X_test, c.X_test)


def test_mnist_holds_out_the_last_hundred_of_each_digit() -> None:
    ds = load_dataset("mnist", seed=0)
    assert np.bincount(ds.y_test).tolist() == [100] * 10
    assert np.bincount(ds.y_train).tolist() == [400] * 10


def test_mnist1d_is_generated_without_touching_the_global_generators() -> None:
    np.random.seed(7)
    random.seed(7)
    want_np, want_py = np.random.random(), random.random()
    np.random.seed(7)
    random.seed(7)

    packaged._mnist1d.__wrapped__()  # the generator itself, not its cached result

    assert np.random.random() == want_np and random.random() == want_py


def test_basicmotions_names_its_activities() -> None:
    ds = load_dataset("basicmotions", seed=0)
    assert ds.classes == ("badminton", "running", "standing", "walking")
    assert np.bincount(ds.y_train).tolist() == [10] * 4


def test_fashion_mnist_reads_debians_files() -> None:
    assert FASHION_DIR.is_dir(), "tools/test.sh installs dataset-fashion-mnist"
    ds = load_dataset("fashion-mnist", seed=0)
    assert ds.classes is not None and ds.classes[9] == "ankle-boot"
    assert np.bincount(ds.y_test).tolist() == [1000] * 10


def test_groups_are_dealt_whole_to_workers() -> None:
    groups = np.array(["s1", "s2", "s1", "s3", "s2", "s3", "s4"])

    shards = partition_groups(groups, 2)

    assert sorted(np.concatenate(shards).tolist()) == list(range(7))
    for shard in shards:
        held = set(groups[shard].tolist())
        others = {g for s in shards if s is not shard for g in groups[s].tolist()}
        assert not held & others
    one_each = partition_groups(groups, 4)
    assert [sorted(set(groups[s].tolist())) for s in one_each] == [
        ["s1"],
        ["s2"],
        ["s3"],
        ["s4"],
    ]
    with pytest.raises(ValueError, match="4 groups for 5 workers"):
        partition_groups(groups, 5)
