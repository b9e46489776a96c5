"""The example sensor modules in firmware/sensors/ under MicroPython and CPython:
an MPU-6050 gesture sensor on a fake I2C bus and button, and the self-supervised
next-value sensor on a fake ADC."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import FIRMWARE, REPO, run_micropython

SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_sensor_examples.py")
SENSORS = str(FIRMWARE / "sensors")


@pytest.mark.firmware
def test_example_sensors_read_label_and_plug_into_a_sensor_source(
    micropython: str,
) -> None:
    # Execute
    mp = run_micropython(micropython, SCRIPT, SENSORS)
    cp = subprocess.run(
        [sys.executable, SCRIPT, SENSORS],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=FIRMWARE,
    )
    # Assert
    assert mp.returncode == 0, mp.stdout + mp.stderr
    assert cp.returncode == 0, cp.stderr
    assert mp.stdout == cp.stdout
    out = dict(line.split(" ", 1) for line in mp.stdout.splitlines())
    assert out["wake"] == "[(104, 107, b'\\x00')]"  # PWR_MGMT_1 = 0: awake
    assert out["released"] == "0 1.0 -1.0 0.5 1.0 -2.0 0.0"
    assert out["held"] == "1 0.0 0.0 -2.0 0.0 0.0 250.13"
    assert out["gone"] == "None"
    assert out["reads"] == "(104, 59, 14)"  # 14 bytes from ACCEL_XOUT_H
    # I2C 0 on SCL 22 / SDA 21 at 400 kHz, button on GPIO 0; the failed reads stop
    assert out["source"] == "3 3 [(0, (22,), (21,), 400000)]"
    # a window of 3 readings, then the next as the label; a missed reading skips
    assert out["next"] == (
        "None | None | None | 2.0:0.5 1.0 1.5 | 2.5:1.0 1.5 2.0 | None"
        " | 3.0:1.5 2.0 2.5"
    )
    # K=8 readings fill the window, then 12 labelled samples of the 20
    assert out["adc"] == "12 12 0.015 0.031 0.046 0.061 0.076 0.092 0.107 0.122"
