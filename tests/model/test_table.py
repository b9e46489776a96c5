"""CSV and NPZ reading: header detection that never drops a data row, text labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgeps.model.table import parse_classes, read_csv, read_npz, read_table


def _csv(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "d.csv"
    f.write_text(text)
    return f


def test_header_with_text_labels_maps_sorted_names(tmp_path: Path) -> None:
    # Prepare
    f = _csv(tmp_path, "a,b,species\n1,2,virginica\n3,4,setosa\n5,6,virginica\n")
    # Execute
    t = read_csv(f)
    # Assert
    assert t.classes == ("setosa", "virginica")
    assert t.y is not None and t.y.tolist() == [1, 0, 1]
    assert t.feature_names == ("a", "b")
    np.testing.assert_allclose(t.X, [[1, 2], [3, 4], [5, 6]])


def test_first_row_of_data_with_a_text_label_is_kept(tmp_path: Path) -> None:
    # Prepare: no header; the first row's label appears again below
    f = _csv(tmp_path, "1,2,cat\n3,4,dog\n5,6,cat\n")
    # Execute
    t = read_csv(f)
    # Assert
    assert t.n_samples == 3 and t.feature_names is None
    assert t.classes == ("cat", "dog") and t.y is not None
    assert t.y.tolist() == [0, 1, 0]


def test_first_row_label_known_to_the_job_is_data(tmp_path: Path) -> None:
    # Prepare: "bird" appears once, but it is one of the job's classes
    f = _csv(tmp_path, "1,2,bird\n3,4,dog\n")
    # Execute
    t = read_csv(f, classes=("bird", "cat", "dog"))
    # Assert
    assert t.n_samples == 2 and t.y is not None and t.y.tolist() == [0, 2]
    assert t.classes == ("bird", "cat", "dog")


def test_text_over_numeric_labels_is_a_header(tmp_path: Path) -> None:
    f = _csv(tmp_path, "0,1,label\n3,4,1\n5,6,0\n")
    t = read_csv(f)
    assert t.n_samples == 2 and t.feature_names == ("0", "1")
    assert t.y is not None and t.y.dtype == np.int32 and t.classes is None


def test_ambiguous_first_row_is_refused_with_the_ways_out(tmp_path: Path) -> None:
    # Prepare: numeric features, a label seen nowhere else, text labels below
    f = _csv(tmp_path, "1,2,label\n3,4,cat\n5,6,dog\n")
    # Execute / Assert
    with pytest.raises(ValueError, match=r"--label label.*--classes"):
        read_csv(f)
    # naming the column settles it: the first row is the header
    t = read_csv(f, label="label")
    assert t.n_samples == 2 and t.classes == ("cat", "dog")


def test_first_row_with_some_text_features_is_refused(tmp_path: Path) -> None:
    f = _csv(tmp_path, "id,400,410,label\n1,2,3,0\n")
    with pytest.raises(ValueError, match=r"some feature cells.*--label NAME"):
        read_csv(f)
    t = read_csv(f, label="label")
    assert t.feature_names == ("id", "400", "410") and t.n_samples == 1


def test_label_column_by_name_anywhere(tmp_path: Path) -> None:
    f = _csv(tmp_path, "kind,x,y\nb,1,2\na,3,4\n")
    t = read_csv(f, label="kind")
    np.testing.assert_allclose(t.X, [[1, 2], [3, 4]])
    assert t.classes == ("a", "b") and t.y is not None and t.y.tolist() == [1, 0]
    with pytest.raises(ValueError, match="no such column"):
        read_csv(f, label="nope")


def test_unknown_class_name_is_refused(tmp_path: Path) -> None:
    f = _csv(tmp_path, "x,label\n1,cat\n2,emu\n")
    with pytest.raises(ValueError, match="'emu'.*cat, dog"):
        read_csv(f, classes=("cat", "dog"))


def test_text_feature_cell_in_a_data_row_names_the_line(tmp_path: Path) -> None:
    f = _csv(tmp_path, "x,y,label\n1,2,a\n3,oops,b\n")
    with pytest.raises(ValueError, match=r"d.csv:3: feature cell 'oops'"):
        read_csv(f)


def test_file_as_wide_as_the_model_has_no_labels(tmp_path: Path) -> None:
    f = _csv(tmp_path, "1,2\n3,4\n")
    t = read_table(f, n_features=2)
    assert t.y is None and t.n_features == 2 and t.n_samples == 2


def test_npz_with_text_labels(tmp_path: Path) -> None:
    f = tmp_path / "d.npz"
    np.savez(f, X=np.arange(6.0).reshape(3, 2), y=np.array(["b", "a", "b"]))
    t = read_npz(f)
    assert t.classes == ("a", "b") and t.y is not None and t.y.tolist() == [1, 0, 1]
    t2 = read_npz(f, classes=("b", "a"))
    assert t2.y is not None and t2.y.tolist() == [0, 1, 0]


@pytest.mark.parametrize("text", ["a", "a,a", "a,,b", ""])
def test_class_names_must_be_distinct_and_two_or_more(text: str) -> None:
    with pytest.raises(ValueError, match="distinct"):
        parse_classes(text)
