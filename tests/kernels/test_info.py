"""`edgeps info`: versions, backend and native build flags, as text and JSON."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest
from edgeps.cli import COMMANDS, main


def test_info_json_reports_backend_and_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Execute
    code = main(["info", "--json"])
    # Assert
    info = json.loads(capsys.readouterr().out)
    assert code == 0
    assert info["kernel_backend"] == "c"
    assert info["kernel_backend_reason"]
    for key in ("edgeps", "python", "numpy", "cffi", "paho-mqtt"):
        assert info[key] and info[key] != "not installed"
    build = info["native_build"]
    assert build["flags"].startswith("-O3 -std=c99")
    assert "-march" not in build["flags"]
    assert build["running"] in ("avx2+fma", "baseline", "none")
    assert build["isa"] and build["isa"] != "other"
    assert "load time" in build["selected"]


def test_info_says_baseline_when_forced() -> None:
    # Prepare: a fresh interpreter, since the variant is picked when the library loads
    env = dict(os.environ, EDGEPS_NATIVE_BASELINE="1")
    # Execute
    res = subprocess.run(
        [sys.executable, "-m", "edgeps", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Assert
    build = json.loads(res.stdout)["native_build"]
    assert res.returncode == 0
    assert build["running"] in ("baseline", "none")
    assert "AVX2" not in build["selected"]


def test_info_text_lists_every_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for key in ("kernel_backend", "numpy", "cffi", "paho-mqtt", "flags"):
        assert key in out


def test_env_forces_numpy_backend_with_reason() -> None:
    # Prepare: a fresh interpreter, since the backend is chosen at import
    env = dict(os.environ, EDGEPS_KERNELS="numpy")
    # Execute
    res = subprocess.run(
        [sys.executable, "-m", "edgeps", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Assert
    info = json.loads(res.stdout)
    assert res.returncode == 0
    assert info["kernel_backend"] == "numpy"
    assert "EDGEPS_KERNELS" in info["kernel_backend_reason"]


def test_missing_extension_falls_back_to_numpy_with_reason() -> None:
    # Prepare: block the extension's import, as on a machine where it failed to build
    code = (
        "import sys; sys.modules['edgeps._native'] = None\n"
        "import edgeps.kernels as k\n"
        "print(k.backend_name()); print(k.backend_reason())\n"
    )
    # Execute
    res = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    # Assert
    name, reason = res.stdout.splitlines()[:2]
    assert res.returncode == 0
    assert name == "numpy"
    assert "unavailable" in reason and "edgeps._native" in reason


def test_selected_names_the_single_arm_build() -> None:
    # Prepare: the module behind `edgeps info`, wherever it lives
    info = importlib.import_module(COMMANDS["info"][0])
    # Execute: what a Raspberry Pi reports, one build for its ISA and no dispatch
    text = info._selected({"running": "none", "isa": "aarch64 neon"})
    # Assert
    assert "aarch64 neon" in text and "nothing is chosen at load time" in text
