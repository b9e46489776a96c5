"""Scripts under tools/: they find edgeps, show what failed, and exit non-zero."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, mosquitto_path

SCRIPT = REPO / "tools" / "emulate_policies.sh"


def _edgeps() -> str:
    """The edgeps next to the interpreter running the tests, else the one on PATH."""
    here = Path(sys.executable).parent / "edgeps"
    found = str(here) if here.is_file() else shutil.which("edgeps")
    if found is None:
        pytest.fail("no edgeps executable: install the package (pip install -e .)")
    return found


def _run(*args: str, edgeps: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EDGEPS": edgeps or _edgeps()}
    return subprocess.run(
        ["sh", str(SCRIPT), *args], capture_output=True, text=True, env=env,
        timeout=180,
    )  # fmt: skip


@pytest.mark.integration
def test_emulate_policies_prints_one_line_per_policy() -> None:
    if mosquitto_path() is None:
        pytest.fail("mosquitto is not installed")

    done = _run("-t", "0.6", "-m", "30", "-w", "2", "asp", "ssp:2")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["asp", "ssp:2"]
    assert all("accuracy" in line and "updates/s" in line for line in lines)


@pytest.mark.integration
def test_emulate_policies_shows_the_error_of_a_failed_serve() -> None:
    if mosquitto_path() is None:
        pytest.fail("mosquitto is not installed")

    done = _run("-m", "5", "-w", "1", "nosuch")

    assert done.returncode == 1
    assert "unknown policy 'nosuch'" in done.stderr
    assert "edgeps serve failed" in done.stderr


def test_emulate_policies_without_edgeps_says_so(tmp_path: Path) -> None:
    done = _run("asp", edgeps=str(tmp_path / "nope"))

    assert done.returncode == 1
    assert "not an executable" in done.stderr


def test_emulate_policies_without_a_policy_prints_usage() -> None:
    done = _run()

    assert done.returncode == 2
    assert "usage" in done.stderr and "POLICY" in done.stderr
