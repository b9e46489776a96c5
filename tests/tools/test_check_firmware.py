"""tools/check_firmware.sh: firmware/ type-checks against the ESP32 stubs and
every file cross-compiles for xtensawin."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_check_firmware_script_passes():
    # Prepare: the tools next to the running interpreter (the venv)
    env = {"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"}
    # Execute
    proc = subprocess.run(
        ["bash", str(REPO / "tools" / "check_firmware.sh")], capture_output=True,
        text=True, timeout=300, env=env,
    )  # fmt: skip
    # Assert
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 errors" in proc.stdout
    assert "compiled" in proc.stdout
