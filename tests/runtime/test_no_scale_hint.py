"""`serve --no-scale` on raw features says the job may sit at chance, and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.commands.serve import raw_features_note
from edgeps.runtime.config import merge
from edgeps.runtime.job import load_model


def raw_csv(path: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)) * [300.0, 2.0, 1.0] + [1000.0, 0.0, 0.0]
    y = (X[:, 1] > 0).astype(int)
    path.write_text(
        "a,b,c,label\n"
        + "".join(f"{r[0]},{r[1]},{r[2]},{k}\n" for r, k in zip(X, y, strict=True))
    )
    return path


def test_no_scale_on_raw_features_is_said_and_scaling_is_not(tmp_path: Path) -> None:
    # Prepare
    data = str(raw_csv(tmp_path / "t.csv"))
    notes = {}
    for scale in (False, True):
        cfg = merge({"test_data": data, "scale": scale})
        # Execute
        notes[scale] = raw_features_note(cfg, load_model(cfg))
    # Assert
    assert notes[True] is None
    assert notes[False] is not None
    assert notes[False].startswith(f"--no-scale: the features of {data} look unscaled")
    assert "sit at chance" in notes[False]


@pytest.mark.integration
def test_serve_prints_the_hint_at_start(mosquitto: Any, tmp_path: Path) -> None:
    # Prepare
    data = raw_csv(tmp_path / "t.csv")
    # Execute
    done = subprocess.run(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--test-data", str(data), "--no-scale", "--max-time", "1", "--quiet"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    # Assert
    assert done.returncode == 0, done.stderr
    assert "edgeps serve: warning: --no-scale: the features of" in done.stderr
