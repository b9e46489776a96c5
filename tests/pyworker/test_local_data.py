"""Worker data: CSV and NPZ files, good and bad, and built-in dataset shards."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgeps.pyworker.localdata import (
    load_csv,
    load_emulated,
    load_file,
    load_npz,
    parse_emulated,
)


def test_csv_with_header_gives_float_features_and_int_labels(tmp_path: Path) -> None:
    # Prepare
    f = tmp_path / "d.csv"
    f.write_text("a,b,label\n1.5,2,0\n-3,4e-1,1\n\n5,6,1\n")
    # Execute
    d = load_csv(f)
    # Assert
    assert d.X.dtype == np.float32 and d.X.flags.c_contiguous
    np.testing.assert_allclose(d.X, [[1.5, 2], [-3, 0.4], [5, 6]])
    assert d.y.dtype == np.int32 and d.y.tolist() == [0, 1, 1]
    assert (d.n_samples, d.n_features) == (3, 2)


def test_csv_without_header_and_real_valued_targets(tmp_path: Path) -> None:
    # Prepare
    f = tmp_path / "d.csv"
    f.write_text("1,2,0.5\n3,4,1.25\n")
    # Execute
    d = load_file(f)
    # Assert
    assert d.y.dtype == np.float32
    np.testing.assert_allclose(d.y, [0.5, 1.25])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,2,0\n3,4\n", "columns"),
        ("1,2,0\n3,x,1\n", "not a number"),
        ("a,b,c\n", "no data rows"),
        ("", "no data rows"),
        ("1\n2\n", "at least one feature"),
        ("1,nan,0\n", "NaN"),
        ("1,2,inf\n", "NaN or infinity"),
    ],
)
def test_malformed_csv_is_a_clear_value_error(
    tmp_path: Path, text: str, message: str
) -> None:
    # Prepare
    f = tmp_path / "bad.csv"
    f.write_text(text)
    # Execute / Assert
    with pytest.raises(ValueError, match=message):
        load_csv(f)


def test_binary_garbage_csv_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "bin.csv"
    f.write_bytes(b"\xff\xfe\x00\x81" * 10)
    with pytest.raises(ValueError):
        load_csv(f)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not found"):
        load_file(tmp_path / "nope.csv")
    with pytest.raises(ValueError, match="not found"):
        load_npz(tmp_path / "nope.npz")


def test_unknown_suffix_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "d.json"
    f.write_text("{}")
    with pytest.raises(ValueError, match="unsupported"):
        load_file(f)


def test_npz_round_trip(tmp_path: Path) -> None:
    # Prepare
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 4))
    y = rng.integers(0, 3, size=20)
    f = tmp_path / "d.npz"
    np.savez(f, X=X, y=y)
    # Execute
    d = load_file(f)
    # Assert
    np.testing.assert_allclose(d.X, X.astype(np.float32))
    assert d.y.tolist() == y.tolist() and d.y.dtype == np.int32


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"X": np.zeros((3, 2))}, "missing"),
        ({"X": np.zeros((3, 2)), "y": np.zeros(4)}, "labels of shape"),
        ({"X": np.zeros(3), "y": np.zeros(3)}, "2-D"),
        ({"X": np.array([["a", "b"]]), "y": np.zeros(1)}, "non-numeric"),
        ({"X": np.full((2, 2), np.nan), "y": np.zeros(2)}, "NaN"),
    ],
)
def test_bad_npz_is_a_clear_value_error(
    tmp_path: Path, arrays: dict[str, np.ndarray], message: str
) -> None:
    f = tmp_path / "bad.npz"
    np.savez(f, **arrays)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        load_npz(f)


def test_corrupt_npz_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "bad.npz"
    f.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(ValueError, match="npz"):
        load_npz(f)


def test_parse_emulated_spec() -> None:
    assert parse_emulated("sensors") == ("sensors", 0, 1)
    assert parse_emulated("digits:2/8") == ("digits", 2, 8)
    for bad in ("sensors:8/8", "sensors:1/0", "sensors:1", "a b", ":1/2", ""):
        with pytest.raises(ValueError):
            parse_emulated(bad)


def test_emulated_shards_are_disjoint_and_cover_the_training_set() -> None:
    # Prepare
    from edgeps.workloads.datasets import load_dataset

    full = load_dataset("sensors", 0)
    # Execute
    shards = [load_emulated(f"sensors:{i}/4", 0)[0] for i in range(4)]
    # Assert
    assert sum(s.n_samples for s in shards) == len(full.y_train)
    rows = {tuple(r) for s in shards for r in s.X.round(5).tolist()}
    assert len(rows) == len(full.y_train)
    assert load_emulated("sensors:1/4", 0)[1] == full.model_spec


def test_non_iid_shards_are_label_skewed() -> None:
    iid = [load_emulated(f"sensors:{i}/4", 1)[0] for i in range(4)]
    skew = [load_emulated(f"sensors:{i}/4", 1, "dirichlet:0.1")[0] for i in range(4)]

    def top_share(d):  # type: ignore[no-untyped-def]
        return np.bincount(d.y).max() / d.n_samples

    assert max(top_share(d) for d in skew) > max(top_share(d) for d in iid) + 0.2


def test_unknown_dataset_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown dataset"):
        load_emulated("nosuch:0/2")
