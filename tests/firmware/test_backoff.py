"""The worker loop's reconnect backoff: doubling over failed connects, back to
the base once a link came up (the loop used to keep doubling across links)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import FIRMWARE, run_micropython

SCRIPT = str(FIRMWARE.parent / "tests" / "helpers" / "mpy" / "fw_backoff.py")
# f: a refused connect, t: a link that comes up and drops at once
PLAN = "fffftfftfffffff"
# after each "t" the next delay is the base again; 1000 ms caps the doubling
EXPECTED = [10, 20, 40, 80, 10, 20, 40, 10, 20, 40, 80, 160, 320, 640]


def delays(cmd: list[str], env: dict[str, str] | None = None) -> list[int]:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, cwd=FIRMWARE, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.firmware
def test_backoff_restarts_from_the_base_after_a_reconnect_micropython(micropython):
    # Execute
    proc = run_micropython(micropython, SCRIPT, PLAN, timeout=60)

    # Assert
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.splitlines()[-1]) == EXPECTED


def test_backoff_restarts_from_the_base_after_a_reconnect_cpython():
    # Execute: the same loop code the CPython workers run
    env = {"PYTHONPATH": str(FIRMWARE)}
    got = delays([sys.executable, SCRIPT, PLAN], env)

    # Assert
    assert got == EXPECTED


def test_backoff_is_capped_at_backoff_max():
    # Execute: eight refused connects in a row, 10 ms doubling to 1000 ms
    got = delays([sys.executable, SCRIPT, "f" * 9], {"PYTHONPATH": str(FIRMWARE)})

    # Assert
    assert got == [10, 20, 40, 80, 160, 320, 640, 1000]
