"""A scaler from the workers' own data: raw CSVs train with no scaler file anywhere.

`edgeps serve --scaler-from workers` welcomes nobody until two `edgeps
worker` processes sent the moments of their raw breast-cancer CSVs (header,
text labels, label-skewed); the scaler it fixes holds both files' rows, the
job reaches its target, and the checkpoint carries that scaler.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from edgeps.model.scaler import Scaler
from edgeps.model.table import read_csv
from edgeps.runtime.checkpoint import load_checkpoint

from tests.e2e.test_own_data import _own_files


@pytest.mark.integration
@pytest.mark.slow
def test_two_workers_raw_csvs_fix_the_scaler_and_reach_the_target(
    mosquitto,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    # Prepare
    test_csv, a_csv, b_csv = _own_files(tmp_path)
    parts = [read_csv(p, label="diagnosis") for p in (a_csv, b_csv)]
    ckpt = tmp_path / "job.npz"
    edgeps = [sys.executable, "-m", "edgeps"]
    serve = subprocess.Popen(
        [*edgeps, "serve", "--broker", mosquitto.url, "--job", "moments",
         "--test-data", str(test_csv), "--label", "diagnosis",
         "--scaler-from", "workers", "--scaler-workers", "2",
         "--target-accuracy", "0.93", "--max-time", "120", "--checkpoint",
         str(ckpt), "--json", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    workers = [
        subprocess.Popen(
            [*edgeps, "worker", "--broker", mosquitto.url, "--job", "moments",
             "--id", wid, "--data", str(path), "--label", "diagnosis"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        for wid, path in (("a", a_csv), ("b", b_csv))
    ]  # fmt: skip
    try:
        # Execute
        out, err = serve.communicate(timeout=180)
        for w in workers:
            w.wait(timeout=30)
    finally:
        for p in (serve, *workers):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert
    assert serve.returncode == 0, err
    summary = json.loads(out)
    assert summary["stop_reason"] == "target_accuracy", summary
    assert sorted(summary["workers"]) == ["a", "b"]
    rows = sum(p.X.shape[0] for p in parts)
    assert f"feature scaler fixed from the data of 2 workers, {rows} rows" in err
    meta = load_checkpoint(ckpt).meta
    assert meta["scaler"]["n"] == rows
    want = Scaler.fit(np.concatenate([p.X for p in parts]))
    # the moments crossed the wire as float32
    np.testing.assert_allclose(meta["scaler"]["mean"], want.mean, rtol=1e-5)
    np.testing.assert_allclose(meta["scaler"]["std"], want.std, rtol=1e-4)
    assert meta["classes"] == ["benign", "malignant"]
