"""Raw samples cut into windows, sample shapes in data files, per-channel scalers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import ModelSpec
from edgeps.model.scaler import Scaler
from edgeps.model.table import read_table
from edgeps.model.windows import Cut, check_fits, cut_windows, fit_scaler, pool_channels


def _ramp(n: int, c: int = 2) -> np.ndarray:
    """Sample i of channel k holds 100 * k + i: every window says where it came from."""
    return (np.arange(n)[:, None] + 100.0 * np.arange(c)[None, :]).astype(np.float32)


def test_windows_are_channel_first_and_start_every_stride() -> None:
    w = cut_windows(_ramp(10), None, None, 4, 3)
    assert w.shape == (2, 4)
    assert w.X.shape == (3, 8)  # starts 0, 3, 6
    assert w.X[1].tolist() == [3, 4, 5, 6, 103, 104, 105, 106]
    assert w.unused == 0 and w.short_runs == 0


def test_a_window_never_crosses_a_change_of_label() -> None:
    y = np.array([0] * 5 + [1] * 6)
    w = cut_windows(_ramp(11), y, None, 3, 1)
    starts = w.X[:, 0].tolist()
    assert starts == [0, 1, 2, 5, 6, 7, 8]
    assert w.y is not None and w.y.tolist() == [0, 0, 0, 1, 1, 1, 1]
    for row, label in zip(w.X, w.y, strict=True):
        assert set(y[int(row[0]) : int(row[2]) + 1].tolist()) == {label}


def test_a_window_never_crosses_a_change_of_group() -> None:
    y = np.zeros(8, dtype=np.int32)
    g = np.array(["a"] * 4 + ["b"] * 4)
    w = cut_windows(_ramp(8), y, g, 4, 2)
    assert w.X[:, 0].tolist() == [0, 4]
    assert w.groups is not None and w.groups.tolist() == ["a", "b"]


def test_short_runs_and_tails_are_counted() -> None:
    y = np.array([0] * 2 + [1] * 7)
    w = cut_windows(_ramp(9), y, None, 3, 3)
    assert w.X[:, 0].tolist() == [2, 5]
    assert w.short_runs == 1 and w.unused == 2 + 1  # the short run, one tail sample


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"window": 20, "stride": 1}, "no window of 20"),
        ({"window": 0, "stride": 1}, ">= 1"),
        ({"window": 3, "stride": 0}, ">= 1"),
        (
            {"window": 5, "stride": 1, "groups": np.array([1] * 6 + [2] * 4)},
            "group .2.",
        ),
        ({"window": 2, "stride": 1, "labels": np.zeros(3)}, "labels of shape"),
    ],
)
def test_bad_windowing_is_a_clear_error(kwargs: dict, match: str) -> None:
    args = {"labels": None, "groups": None, **kwargs}
    with pytest.raises(ValueError, match=match):
        cut_windows(_ramp(10), source="rec.csv", **args)


def test_cut_flags_need_a_window() -> None:
    with pytest.raises(ValueError, match="go with --window"):
        Cut(None, 2, None)
    with pytest.raises(ValueError, match=">= 1"):
        Cut(0)
    assert Cut(8).flags() == {"window": 8, "stride": None, "group": None}


def _write_raw(path: Path) -> None:
    lines = ["ax,ay,activity,subject"]
    for subject in ("s1", "s2"):
        for label in ("walk", "sit"):
            for t in range(6):
                lines.append(f"{t},{-t},{label},{subject}")
    path.write_text("\n".join(lines) + "\n")


def test_a_raw_sample_csv_reads_as_windows(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    _write_raw(path)
    table = read_table(path, window=4, stride=2, group="subject")
    assert table.shape == (2, 4)
    assert table.n_samples == 2 * 2 * 2  # 2 subjects x 2 labels x starts 0, 2
    assert table.classes == ("sit", "walk")
    assert table.X[0].tolist() == [0, 1, 2, 3, 0, -1, -2, -3]
    assert table.feature_names is not None and table.feature_names[4] == "ay[0]"


def test_raw_sample_csv_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    _write_raw(path)
    with pytest.raises(ValueError, match="raw.csv: no window of 9"):
        read_table(path, window=9, group="subject")
    with pytest.raises(ValueError, match="--group 'person'"):
        read_table(path, window=2, group="person")
    with pytest.raises(ValueError, match="go with --window"):
        read_table(path, stride=2)
    npz = tmp_path / "w.npz"
    np.savez(npz, X=np.zeros((2, 1, 4)), y=np.zeros(2))
    with pytest.raises(ValueError, match="an NPZ holds its windows"):
        read_table(npz, window=2)


@pytest.mark.parametrize("shape", [(3, 16), (1, 8, 8), (3, 5, 4)])
def test_npz_windows_and_images_keep_their_shape(tmp_path: Path, shape: tuple) -> None:
    X = np.arange(5 * int(np.prod(shape)), dtype=np.float32).reshape(5, *shape)
    np.savez(tmp_path / "d.npz", X=X, y=np.arange(5) % 2)
    table = read_table(tmp_path / "d.npz")
    assert table.shape == shape
    assert table.X.shape == (5, int(np.prod(shape)))
    assert np.array_equal(table.X[2], X[2].reshape(-1))  # channel first


def test_rows_in_an_npz_have_no_shape(tmp_path: Path) -> None:
    np.savez(tmp_path / "d.npz", X=np.zeros((4, 3)), y=np.zeros(4))
    assert read_table(tmp_path / "d.npz").shape is None


@pytest.mark.parametrize(
    ("X", "match"),
    [
        (np.zeros((2, 1, 2, 2, 2)), "expected 2-D rows"),
        (np.zeros((2, 0, 4)), "expected 2-D rows"),
        (np.array([np.zeros(3), np.zeros(4)], dtype=object), "ragged"),
    ],
)
def test_a_misshaped_or_ragged_npz_is_refused(
    tmp_path: Path, X: np.ndarray, match: str
) -> None:
    path = tmp_path / "bad.npz"
    np.savez(path, X=X, y=np.zeros(2))
    with pytest.raises(ValueError, match=match):
        read_table(path)


def test_the_window_scaler_is_per_channel() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 2, 10)) * np.array([1.0, 5.0])[None, :, None]
    x += np.array([3.0, -2.0])[None, :, None] + np.linspace(0, 1, 10)[None, None, :]
    scaler = fit_scaler(x.reshape(50, 20), (2, 10))
    assert scaler.n_features == 20
    for c in range(2):
        assert np.allclose(scaler.mean[c * 10 : (c + 1) * 10], x[:, c].mean())
        assert np.allclose(scaler.std[c * 10 : (c + 1) * 10], x[:, c].std())
    assert fit_scaler(x.reshape(50, 20), None).mean[0] != scaler.mean[0]


def test_pooled_parts_equal_the_pooled_whole() -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 12)) + np.arange(12)
    parts = Scaler.fit(X[:10]).merge(Scaler.fit(X[10:]))
    pooled = pool_channels(parts, (3, 4))
    assert np.allclose(pooled.mean, fit_scaler(X, (3, 4)).mean)
    assert np.allclose(pooled.std, fit_scaler(X, (3, 4)).std)
    assert pool_channels(pooled, (3, 4)).mean.tolist() == pooled.mean.tolist()


def test_a_conv_model_must_fit_the_sample_shape() -> None:
    spec = ModelSpec.parse("conv1d:2x8-c4k3-m2-3")
    check_fits(spec, (2, 8), "d.npz")
    check_fits(spec, None, "d.npz")
    with pytest.raises(ValueError, match=r"d.npz has \(4, 4\)"):
        check_fits(spec, (4, 4), "d.npz")


def test_samples_in_no_window_are_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "raw.csv"
    path.write_text(
        "a,label\n" + "".join(f"{i},{'x' if i < 7 else 'y'}\n" for i in range(9))
    )

    table = read_table(path, label="label", window=3)  # stride defaults to the window

    assert table.X[:, 0].tolist() == [0, 3]
    assert "3 of 9 samples are in no window" in caplog.text


def test_raw_samples_without_labels_cut_by_group_only(tmp_path: Path) -> None:
    path = tmp_path / "raw.csv"
    rows = [f"{i},{-i},{'r1' if i < 5 else 'r2'}\n" for i in range(10)]
    path.write_text("a,b,rec\n" + "".join(rows))

    table = read_table(path, window=5, group="rec", channels=2)

    assert table.y is None and table.shape == (2, 5)
    assert table.groups is not None and table.groups.tolist() == ["r1", "r2"]
