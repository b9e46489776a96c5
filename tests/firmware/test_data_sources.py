"""Data sources: ring buffer, EPSD and CSV files, sensor callback, on both Pythons."""

from __future__ import annotations

import subprocess
import sys
from array import array
from pathlib import Path

import numpy as np
import pytest
from edgeps_worker import data, datafile
from edgeps_worker.ring import RingBuffer

from tests.conftest import FIRMWARE, REPO, run_micropython

SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_data.py")


def write_inputs(tmp_path: Path) -> tuple[str, str]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 5)).astype(np.float32)
    y = rng.integers(0, 4, 20)
    binf = tmp_path / "d.bin"
    datafile.write_file(str(binf), X.tolist(), y.tolist())
    csvf = tmp_path / "d.csv"
    csvf.write_text("# x0,x1,label\n1,2,0\n3,4,1\n\n5,6,1\n")
    return str(binf), str(csvf)


@pytest.mark.firmware
def test_micropython_and_cpython_draw_identical_batches(micropython, tmp_path):
    # Prepare
    binf, csvf = write_inputs(tmp_path)
    # Execute
    mp = run_micropython(micropython, SCRIPT, binf, csvf)
    cp = subprocess.run(
        [sys.executable, SCRIPT, binf, csvf],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=FIRMWARE,
    )
    # Assert
    assert mp.returncode == 0, mp.stderr
    assert cp.returncode == 0, cp.stderr
    assert mp.stdout == cp.stdout
    out = dict(line.split(" ", 1) for line in mp.stdout.splitlines())
    assert out["ring"].startswith("4 6 [1, 2, 2, 0]")
    assert out["sensor"] == "2 2 1"
    assert out["error"] == "ValueError"


def test_file_source_reads_the_rows_written():
    # Prepare
    rows = [[float(i), float(-i)] for i in range(10)]
    labels = list(range(10))
    path = Path(__file__).parent / "__fw_data_rows.bin"
    try:
        datafile.write_file(str(path), rows, labels)
        src = data.FileSource(str(path), seed=2)
        X = array("f", bytes(4 * 2 * 8))
        y = array("i", bytes(4 * 8))
        # Execute
        n = src.batch(X, y, 8)
        src.close()
    finally:
        path.unlink(missing_ok=True)
    # Assert: every drawn row is the row its label names
    assert n == 8
    for r in range(8):
        assert (X[2 * r], X[2 * r + 1]) == (float(y[r]), float(-y[r]))


def test_ring_buffer_wraps_and_rejects_bad_samples():
    ring = RingBuffer(3, 2)
    for i in range(5):
        ring.add([i, i], i)
    assert ring.count() == 3 and sorted(ring.y) == [2, 3, 4]
    with pytest.raises(ValueError):
        ring.add([1.0], 0)
    with pytest.raises(ValueError):
        ring.add([float("inf"), 0.0], 0)
    with pytest.raises(ValueError):
        RingBuffer(0, 2)


def test_empty_ring_gives_an_empty_batch():
    ring = RingBuffer(3, 2)
    assert ring.batch(array("f", bytes(16)), array("i", bytes(8)), 2) == 0


def test_bad_files_raise_value_error(tmp_path):
    short = tmp_path / "short.bin"
    short.write_bytes(b"EPSD")
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("1,2\n")
    truncated = tmp_path / "trunc.bin"
    datafile.write_file(str(truncated), [[1.0, 2.0]] * 3, [0, 1, 0])
    truncated.write_bytes(truncated.read_bytes()[:-3])
    for path in (short, truncated):
        with pytest.raises(ValueError):
            data.FileSource(str(path))
    with pytest.raises(ValueError, match="expected 3 values"):
        datafile.load_csv(str(bad_csv), 2, 4)
    good = tmp_path / "good.bin"
    datafile.write_file(str(good), [[1.0, 2.0]], [0])
    with pytest.raises(ValueError, match="model wants"):
        datafile.open_source(str(good), 3)
