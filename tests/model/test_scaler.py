"""The feature scaler: moments, merging parts, constant features, its JSON form."""

from __future__ import annotations

import json

import numpy as np
import pytest
from edgeps.model.scaler import Scaler


def _data(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(loc=[500.0, -2.0, 0.01], scale=[120.0, 3.0, 0.002], size=(200, 3))


def test_fit_gives_numpys_mean_and_population_std() -> None:
    X = _data()
    s = Scaler.fit(X)
    np.testing.assert_allclose(s.mean, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(s.std, X.std(axis=0), rtol=1e-9)
    Z = s.transform(X)
    assert Z.dtype == np.float32 and Z.flags.c_contiguous
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-4)
    np.testing.assert_allclose(Z.std(axis=0), 1.0, atol=1e-4)


def test_merged_parts_equal_the_whole() -> None:
    # Prepare: three uneven parts, as three workers' files
    X = _data(1)
    parts = [X[:17], X[17:120], X[120:]]
    # Execute
    merged = (
        Scaler.fit(parts[0]).merge(Scaler.fit(parts[1])).merge(Scaler.fit(parts[2]))
    )
    whole = Scaler.fit(X)
    # Assert
    assert merged.n == whole.n == 200
    np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-12)
    np.testing.assert_allclose(merged.std, whole.std, rtol=1e-9)


def test_from_moments_is_the_wire_form() -> None:
    X = _data(2)
    s = Scaler.from_moments(len(X), X.sum(axis=0), (X * X).sum(axis=0))
    np.testing.assert_allclose(s.mean, Scaler.fit(X).mean)


def test_constant_feature_is_centred_not_divided() -> None:
    X = np.column_stack([np.full(10, 7.0), np.arange(10.0)])
    s = Scaler.fit(X)
    assert s.std[0] == 1.0
    np.testing.assert_allclose(s.transform(X)[:, 0], 0.0)


def test_json_round_trip_is_exact() -> None:
    s = Scaler.fit(_data(3))
    back = Scaler.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back.n == s.n
    np.testing.assert_array_equal(back.s1, s.s1)
    np.testing.assert_array_equal(back.s2, s.s2)


def test_bad_scalers_are_refused() -> None:
    with pytest.raises(ValueError, match="one row"):
        Scaler.from_moments(0, [0.0], [0.0])
    with pytest.raises(ValueError, match="one value per feature"):
        Scaler.from_moments(3, [0.0, 1.0], [0.0])
    with pytest.raises(ValueError, match="merge"):
        Scaler.fit(np.ones((2, 2))).merge(Scaler.fit(np.ones((2, 3))))
    with pytest.raises(ValueError, match="takes 2 features"):
        Scaler.fit(np.ones((2, 2))).transform(np.ones((2, 3)))
