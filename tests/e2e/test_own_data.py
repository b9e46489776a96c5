"""Own data end to end: raw CSVs with a header and text labels, exported and rerun.

Two `edgeps worker` processes train on unscaled breast-cancer CSVs (label
first, as names, split non-IID), `edgeps serve --test-data` evaluates on a
held-out CSV, and the ONNX export of its checkpoint, run by onnxruntime,
scores what serve reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from edgeps.model.table import read_csv

NAMES = ("malignant", "benign")  # sklearn's target_names: 0, 1


def _write(path: Path, X: np.ndarray, y: np.ndarray, features: list[str]) -> None:
    lines = [",".join(["diagnosis", *features])]
    lines += [
        ",".join([NAMES[int(t)], *(f"{v:.6g}" for v in row)])
        for row, t in zip(X, y, strict=True)
    ]
    path.write_text("\n".join(lines) + "\n")


def _own_files(tmp_path: Path) -> tuple[Path, Path, Path]:
    """Test rows (20%, stratified) and two label-skewed worker files, all raw."""
    skd = pytest.importorskip("sklearn.datasets")
    bunch = skd.load_breast_cancer()
    X, y = np.asarray(bunch.data), np.asarray(bunch.target)
    rng = np.random.default_rng(7)
    test = np.concatenate(
        [
            rng.permutation(np.flatnonzero(y == c))[: int(0.2 * np.sum(y == c))]
            for c in (0, 1)
        ]
    )
    rest = np.setdiff1d(np.arange(len(y)), test)
    # worker a holds 80% of the malignant rows and 20% of the benign ones
    take_a = np.concatenate(
        [
            (idx := rng.permutation(rest[y[rest] == c]))[: int(len(idx) * share)]
            for c, share in ((0, 0.8), (1, 0.2))
        ]
    )
    take_b = np.setdiff1d(rest, take_a)
    features = [str(n) for n in bunch.feature_names]
    paths = (tmp_path / "test.csv", tmp_path / "a.csv", tmp_path / "b.csv")
    for path, rows in zip(paths, (test, take_a, take_b), strict=True):
        _write(path, X[rows], y[rows], features)
    return paths


@pytest.mark.integration
@pytest.mark.slow
def test_raw_csv_workers_reach_the_target_and_the_onnx_export_agrees(
    mosquitto,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    # Prepare
    ort = pytest.importorskip("onnxruntime")
    test_csv, a_csv, b_csv = _own_files(tmp_path)
    ckpt = tmp_path / "job.npz"
    edgeps = [sys.executable, "-m", "edgeps"]
    serve = subprocess.Popen(
        [*edgeps, "serve", "--broker", mosquitto.url, "--job", "own",
         "--test-data", str(test_csv), "--label", "diagnosis",
         "--target-accuracy", "0.93", "--max-time", "120", "--checkpoint",
         str(ckpt), "--json", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    workers = [
        subprocess.Popen(
            [
                *edgeps,
                "worker",
                "--broker",
                mosquitto.url,
                "--job",
                "own",
                "--id",
                wid,
                "--data",
                str(path),
                "--label",
                "diagnosis",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for wid, path in (("a", a_csv), ("b", b_csv))
    ]
    try:
        # Execute
        out, err = serve.communicate(timeout=180)
        for w in workers:
            w.wait(timeout=30)
        onnx_path = tmp_path / "job.onnx"
        exported = subprocess.run(
            [*edgeps, "export", str(ckpt), "--format", "onnx", "--out", str(onnx_path)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        for p in (serve, *workers):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert
    assert serve.returncode == 0, err
    summary = json.loads(out)
    assert summary["stop_reason"] == "target_accuracy", summary
    assert exported.returncode == 0, exported.stderr
    rows = read_csv(test_csv, label="diagnosis")
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    labels = session.run(["label"], {"x": rows.X})[0]
    assert rows.classes == ("benign", "malignant")
    onnx_accuracy = float(np.mean(labels == rows.y))
    print(
        f"\nserve: accuracy {summary['accuracy']:.4f} in {summary['elapsed']:.1f} s "
        f"({summary['updates']} updates); onnxruntime on {len(rows.y)} test rows: "
        f"{onnx_accuracy:.4f}"
    )
    assert abs(onnx_accuracy - summary["accuracy"]) <= 0.005
