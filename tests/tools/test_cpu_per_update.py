"""tools/cpu_per_update.py: refuses bad arguments; measures a real job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mosquitto_path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "cpu_per_update.py"


@pytest.mark.parametrize("argv", [["0", "homogeneous"], ["8", "homogeneous", "5"]])
def test_out_of_range_arguments_exit_2(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), *argv], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "workers in" in done.stderr


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed")
def test_it_reports_each_process_cost_per_update() -> None:
    done = subprocess.run(
        [sys.executable, str(TOOL), "8", "homogeneous", "10"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert row["updates_per_s"] > 0
    assert set(row["us_per_update"]) == {"serve", "emulate", "broker"}
    assert all(v > 0 for v in row["us_per_update"].values())
