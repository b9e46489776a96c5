"""`pip wheel` of the project: the extension's flags come from this build only."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROJECT_FILES = ["pyproject.toml", "setup.py", "README.md"]
PROJECT_DIRS = ["host", "firmware", "native"]
SKIP = shutil.ignore_patterns("__pycache__", "*.so", "*.o", "build", "*.egg-info")


@dataclass
class Wheel:
    flags: str  # the extension's compile flags, from its build info
    metadata: str


def copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, dest / name)
    for name in PROJECT_DIRS:
        shutil.copytree(REPO / name, dest / name, ignore=SKIP)
    return dest


def build_wheel(project: Path, out: Path, march: str | None = None) -> Wheel:
    """Build a wheel in place, as `pip install .` does."""
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
        (so,) = [n for n in zf.namelist() if n.startswith("edgeps/_native")]
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        data, metadata = zf.read(so), zf.read(meta).decode()
    # the literal behind eps_build_info(); debug info names other flags
    found = re.search(rb";flags=([^;\0]*);", data)
    assert found is not None, "no build info string in the extension"
    return Wheel(found.group(1).decode(), metadata)


@dataclass
class Builds:
    """Two wheels built in turn in one tree unpacked from the project's sdist."""

    unpacked: Path  # the sdist's tree
    native: Wheel  # first, with -march=native
    default: Wheel  # then the default build, in the same tree


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> Builds:
    """An sdist made by setuptools' backend from a clean copy, unpacked; a wheel
    built in it with -march=native (leaving its objects in build/), then the
    default wheel in the same tree (one setup for both tests: each build
    compiles the extension)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    project = copy_project(tmp_path / "src")
    res = subprocess.run(
        [sys.executable, "-c"]
        + ["import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"]
        + [str(tmp_path / "dist")],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    name = res.stdout.strip().splitlines()[-1]
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    with tarfile.open(tmp_path / "dist" / name) as tf:
        tf.extractall(tmp_path / "unpacked", **safe)
    (unpacked,) = (tmp_path / "unpacked").iterdir()
    native = build_wheel(unpacked, tmp_path / "w1", march="native")
    if not (unpacked / "build").is_dir():
        pytest.fail("the wheel was not built in place: no build/ to go stale")
    default = build_wheel(unpacked, tmp_path / "w2")
    return Builds(unpacked, native, default)


def test_stale_build_dir_never_keeps_old_flags(builds: Builds) -> None:
    # Prepare, Execute: a -march=native build left its objects in build/, then
    # the default build ran in the same tree (the fixture)
    # Assert
    assert "-march=native" in builds.native.flags.split()
    assert builds.default.flags.startswith("-O3 -std=c99")
    assert "-march" not in builds.default.flags
    assert "License-Expression: MIT" in builds.default.metadata.splitlines()


def test_sdist_holds_everything_a_wheel_needs(builds: Builds) -> None:
    # Prepare, Execute: both wheels were built from the unpacked sdist alone
    # Assert
    assert builds.native.flags.startswith("-O3 -std=c99")
    assert builds.default.flags.startswith("-O3 -std=c99")
    assert (builds.unpacked / "native" / "eps_build.py").is_file()
