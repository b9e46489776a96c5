"""tools/raw_samples.py: BasicMotions as raw-sample CSVs, cut as the tool cuts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels.layers import default_conv1d
from edgeps.model.table import read_samples

from tests.conftest import REPO


def test_the_raw_csvs_cut_into_the_windows_the_board_trains_on_and_predicts(
    tmp_path: Path,
) -> None:
    pytest.importorskip("pyts")
    # Execute
    tool = str(REPO / "tools" / "raw_samples.py")
    subprocess.run(
        [sys.executable, tool, "--out", str(tmp_path)],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip

    # Assert: 40 recordings of 100 samples; the host's cut of the raw test file
    # is windows_test.csv row for row, and board.json names the model it gets
    raw = tmp_path / "raw_test.csv"
    assert raw.read_text().splitlines()[0] == "ax,ay,az,gx,gy,gz,recording,activity"
    cut = read_samples(raw, window=50, stride=25, group="recording")
    assert cut.X.shape == (120, 300) and cut.shape == (6, 50)
    rows = np.loadtxt(tmp_path / "windows_test.csv", delimiter=",", dtype=str)
    np.testing.assert_allclose(rows[:, :-1].astype(np.float32), cut.X, rtol=1e-6)
    names = [cut.classes[int(i)] for i in cut.y]
    assert list(rows[:, -1]) == names
    cfg = json.loads((tmp_path / "board.json").read_text())
    assert cfg["model"] == default_conv1d((6, 50), 4) and cfg["mode"] == "infer"
    # windows_train.csv is the cut of raw_train.csv, the rows board_train.json
    # trains on in job motion with the job's model
    train = read_samples(
        tmp_path / "raw_train.csv", window=50, stride=25, group="recording"
    )
    rows = np.loadtxt(tmp_path / "windows_train.csv", delimiter=",", dtype=str)
    np.testing.assert_allclose(rows[:, :-1].astype(np.float32), train.X, rtol=1e-6)
    assert list(rows[:, -1]) == [train.classes[int(i)] for i in train.y]
    cfg = json.loads((tmp_path / "board_train.json").read_text())
    assert cfg["model"] == default_conv1d((6, 50), 4) and cfg["mode"] == "train"
    assert (cfg["job"], cfg["worker_id"], cfg["data"]) == (
        "motion",
        "b0",
        "windows_train.csv",
    )
