"""Raw sensor samples end to end: CSV recordings cut into windows, a conv1d trained.

Two `edgeps worker` processes hold raw-sample CSVs (three accelerometer
channels, an activity label, a subject column; two subjects each) and cut them
with ``--window/--stride/--group``; `edgeps serve` cuts a third subject's
recordings the same way, fixes a per-channel scaler from the workers' moments
(``--scaler-from workers``) and trains ``--model conv1d`` well above chance;
`edgeps predict` then scores the checkpoint on the raw test CSV.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from edgeps.runtime.checkpoint import load_checkpoint

RATE_HZ = 25.0
ACTIVITIES = {"still": (0.3, 0.15), "walk": (1.8, 1.0), "run": (3.2, 1.8)}
WINDOW, STRIDE = 50, 25


def write_recordings(path: Path, subjects: list[str], seed: int) -> None:
    """Per subject and activity, 400 raw samples of 3 channels, as one CSV."""
    rng = np.random.default_rng(seed)
    t = np.arange(400) / RATE_HZ
    lines = ["ax,ay,az,activity,subject"]
    for subject in subjects:
        offset = rng.normal(0, 0.3, size=3) + np.array([0.0, 0.0, 9.8])  # posture
        for name, (freq, amp) in ACTIVITIES.items():
            f = freq * rng.uniform(0.9, 1.1)
            a = amp * rng.uniform(0.8, 1.2, size=3)
            phase = rng.uniform(0, 2 * np.pi, size=3)
            x = offset + a * np.sin(2 * np.pi * f * t[:, None] + phase)
            x += rng.normal(0, 0.3, size=x.shape)
            lines += [
                ",".join([*(f"{v:.4f}" for v in row), name, subject]) for row in x
            ]
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.integration
@pytest.mark.slow
def test_two_workers_train_a_conv1d_on_raw_sample_csvs(
    mosquitto,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    # Prepare
    test_csv, a_csv, b_csv = (tmp_path / f"{n}.csv" for n in ("test", "a", "b"))
    write_recordings(test_csv, ["s5"], seed=5)
    write_recordings(a_csv, ["s1", "s2"], seed=1)
    write_recordings(b_csv, ["s3", "s4"], seed=3)
    cut = ["--window", str(WINDOW), "--stride", str(STRIDE), "--group", "subject"]
    ckpt = tmp_path / "job.npz"
    edgeps = [sys.executable, "-m", "edgeps"]
    serve = subprocess.Popen(
        [*edgeps, "serve", "--broker", mosquitto.url, "--job", "windows",
         "--test-data", str(test_csv), "--label", "activity", *cut,
         "--model", "conv1d", "--scaler-from", "workers", "--scaler-workers", "2",
         "--target-accuracy", "0.9", "--max-time", "150", "--checkpoint",
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
                "windows",
                "--id",
                wid,
                "--data",
                str(path),
                "--label",
                "activity",
                *cut,
                "--model",
                "conv1d",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for wid, path in (("a", a_csv), ("b", b_csv))
    ]
    try:
        # Execute
        out, err = serve.communicate(timeout=200)
        for w in workers:
            w.wait(timeout=30)
        predicted = subprocess.run(
            [*edgeps, "predict", str(ckpt), "--data", str(test_csv),
             "--label", "activity", *cut, "--json"],
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
    meta = load_checkpoint(str(ckpt)).meta
    assert str(meta["model"]).startswith("conv1d:3x50-"), meta["model"]
    mean = np.asarray(meta["scaler"]["s1"]) / meta["scaler"]["n"]
    per_channel = mean.reshape(3, WINDOW)
    assert np.allclose(per_channel, per_channel[:, :1])  # one mean per channel
    assert abs(per_channel[2, 0] - 9.8) < 0.5  # z holds gravity, the others do not
    assert predicted.returncode == 0, predicted.stderr
    scored = json.loads(predicted.stdout)
    assert scored["rows"] == 3 * (1 + (400 - WINDOW) // STRIDE)
    print(
        f"\nserve: {meta['model']} accuracy {summary['accuracy']:.4f} in "
        f"{summary['elapsed']:.1f} s ({summary['updates']} updates); predict on "
        f"{scored['rows']} windows: {scored['accuracy']:.4f}"
    )
    assert abs(scored["accuracy"] - summary["accuracy"]) <= 0.02
