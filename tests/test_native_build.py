"""`pip wheel` of the project: the extension's flags come from this build only."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PROJECT_FILES = ["pyproject.toml", "setup.py", "README.md"]
PROJECT_DIRS = ["host", "firmware", "native"]
SKIP = shutil.ignore_patterns("__pycache__", "*.so", "*.o", "build", "*.egg-info")


def copy_project(dest: Path) -> Path:
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, dest / name)
    for name in PROJECT_DIRS:
        shutil.copytree(REPO / name, dest / name, ignore=SKIP)
    return dest


def build_wheel(project: Path, out: Path, march: str | None) -> str:
    """Build a wheel in place (as `pip install .` does); the extension's flags."""
    env = {k: v for k, v in os.environ.items() if k != "EDGEPS_NATIVE_MARCH"}
    if march is not None:
        env["EDGEPS_NATIVE_MARCH"] = march
    res = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps"]
        + ["--no-build-isolation", "-w", str(out), str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (wheel,) = out.glob("edgeps-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        (name,) = [n for n in zf.namelist() if n.startswith("edgeps/_native")]
        data = zf.read(name)
    # the literal behind eps_build_info(); debug info names other flags
    found = re.search(rb";flags=([^;\0]*);", data)
    assert found is not None, "no build info string in the extension"
    return found.group(1).decode()


def test_stale_build_dir_never_keeps_old_flags(tmp_path: Path) -> None:
    # Prepare: a first build with -march=native leaves its objects in build/
    project = copy_project(tmp_path)
    first = build_wheel(project, tmp_path / "w1", march="native")
    if not (project / "build").is_dir():
        pytest.fail("the wheel was not built in place: no build/ to go stale")
    # Execute: the default build, in the same tree
    second = build_wheel(project, tmp_path / "w2", march=None)
    # Assert
    assert "-march=native" in first.split()
    assert second.startswith("-O3 -std=c99")
    assert "-march" not in second
