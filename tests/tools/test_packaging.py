"""The wheel lists every package of the source tree (a missing one installs broken)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_every_host_package_is_in_the_wheel() -> None:
    # Prepare
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    host = ROOT / "host"
    found = {
        ".".join(init.parent.relative_to(host).parts)
        for init in host.glob("edgeps/**/__init__.py")
    }

    # Execute
    missing = found - listed

    # Assert
    assert not missing, f"add to pyproject.toml [tool.setuptools] packages: {missing}"
    assert {"edgeps_worker", "edgeps_firmware"} <= listed


def _clean_copy(dest: Path) -> Path:
    """The checkout's files git knows (tracked and new), without built extensions."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.mark.slow
def test_the_wheel_builds_and_runs_on_numpy_without_a_c_compiler(tmp_path) -> None:
    # Prepare: a PATH with no compiler (only this Python and a shell), CC unusable
    pytest.importorskip("setuptools")
    pytest.importorskip("cffi")
    src = _clean_copy(tmp_path / "src")
    bare = tmp_path / "bin"
    bare.mkdir()
    for cmd in ("sh", "env"):
        found = shutil.which(cmd)
        if found:
            (bare / cmd).symlink_to(found)
    (bare / "python3").symlink_to(sys.executable)
    env = dict(os.environ, PATH=str(bare), CC="/nonexistent")
    env.pop("EDGEPS_KERNELS", None)
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    wheels, venv = tmp_path / "wheels", tmp_path / "venv"

    # Execute: build the wheel (no network: this venv's setuptools and cffi),
    # install it into a fresh venv whose dependencies come from this one
    built = subprocess.run(
        [sys.executable, "-m", "pip", "-v", "wheel", "--no-deps",
         "--no-build-isolation", "-w", str(wheels), str(src)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("edgeps-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)],
                   check=True, timeout=120)  # fmt: skip
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c",
             "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
    )  # fmt: skip
    deps = [p for p in sys.path if p.endswith("site-packages")]
    (site / "_edgeps_test_deps.pth").write_text("\n".join(deps) + "\n")
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)],
                   env=env, check=True, timeout=300, capture_output=True)  # fmt: skip
    info = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "edgeps", "info", "--json"],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip

    # Assert: no C extension in the wheel, the installed copy runs on numpy
    assert "no working C compiler" in built.stdout + built.stderr
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    assert info.returncode == 0, info.stderr
    out = json.loads(info.stdout)
    assert out["kernel_backend"] == "numpy"
    assert out["edgeps"]
