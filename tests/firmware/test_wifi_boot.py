"""boot.py's Wi-Fi (edgeps_worker.wifi) under MicroPython, scripted WLAN: retries."""

from __future__ import annotations

import pytest

from tests.conftest import REPO, run_micropython

SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_network.py")


@pytest.mark.firmware
def test_wifi_comes_up_on_the_first_try(micropython):
    proc = run_micropython(micropython, SCRIPT, "3", "2", "2000")
    assert proc.returncode == 0, proc.stderr
    assert "RESULT True connect:lab" in proc.stdout
    assert "wifi: up 10.0.0.7" in proc.stdout


@pytest.mark.firmware
def test_wifi_gives_up_after_the_given_tries(micropython):
    proc = run_micropython(micropython, SCRIPT, "-1", "2", "200", timeout=60)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    assert line == "RESULT False connect:lab disconnect connect:lab disconnect"
