"""A board's life under the real MicroPython binary started like an ESP32: it stops
when it is finished (no soft-reset loop), and never imports boot.py again."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from edgeps.kernels import ModelSpec

from tests.conftest import FIRMWARE, REPO
from tests.helpers.fw_host import MiniPS, write_worker_config

pytestmark = pytest.mark.firmware
START = str(REPO / "tests" / "helpers" / "mpy" / "fw_esp32_start.py")
MPY_TESTS = str(REPO / "tests" / "helpers" / "mpy")


def start_like_an_esp32(exe: str, config: Path, cycles: int = 3) -> tuple[dict, str]:
    """boot.py then main.py, soft-resetting on SystemExit up to ``cycles`` times."""
    board = config.parent / "board"
    board.mkdir(exist_ok=True)
    (board / "config.json").write_text(config.read_text())
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:{MPY_TESTS}:.frozen")
    proc = subprocess.run(
        [exe, START, str(FIRMWARE), str(cycles)], capture_output=True, text=True,
        timeout=120, env=env, cwd=board,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    line = next((x for x in out.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, out
    result = dict(kv.split("=") for kv in line[7:].split())
    return result, out


def logistic_ps(port: int) -> MiniPS:
    """A started scripted PS for the logistic:8 job these boards join."""
    ps = MiniPS(
        port, "fwjob", "logistic:8", ModelSpec.parse("logistic:8").init_params(0)
    )
    ps.start()
    return ps


def stats_of(out: str) -> dict:
    m = re.search(r"^stopped: \w+ (\{.*\})$", out, re.M)
    assert m is not None, out
    return json.loads(m.group(1))


def test_a_password_without_username_is_refused_and_the_board_stays_idle(
    micropython, tmp_path
):
    # Prepare: [MQTT-3.1.2-22] forbids a password without a user name
    cfg = write_worker_config(tmp_path, 1883, password="pw", wifi_ssid="lab")

    # Execute
    result, out = start_like_an_esp32(micropython, cfg)

    # Assert: said once, clearly, then idle at the REPL: no reset loop
    assert "bad config: a password needs a username" in out
    assert result["runs"] == "1" and result["resets"] == "0", out
    assert "finished, status 2" in out


@pytest.mark.integration
def test_a_finished_board_stays_idle_instead_of_rejoining(
    micropython, mosquitto, tmp_path
):
    # Prepare
    cfg = write_worker_config(
        tmp_path, mosquitto.port, data="", sensor="fw_sensor", max_iterations=2,
        model="logistic:8", wifi_ssid="lab",
    )  # fmt: skip
    ps = logistic_ps(mosquitto.port)
    try:
        # Execute
        result, out = start_like_an_esp32(micropython, cfg)
        ps.wait_for(lambda p: p.byes, 5)
    finally:
        ps.stop()

    # Assert: one run, one process, one session
    assert "stopped: iterations" in out and "finished, status 0" in out
    assert result["runs"] == "1" and result["resets"] == "0", out
    assert len({h.instance for h in ps.hellos}) == 1
    assert [u.seq for u in ps.updates] == [1, 2]
    assert len({u.session for u in ps.updates}) == 1
    # Wi-Fi for each connect came from edgeps_worker.wifi, not a second boot.py
    assert result["boot_imported"] == "False" and result["wlan_connects"] == "1"


@pytest.mark.integration
def test_out_of_memory_stops_the_board_instead_of_reconnecting(
    micropython, mosquitto, tmp_path
):
    # Prepare: the sensor driver raises MemoryError on its 8th reading
    cfg = write_worker_config(
        tmp_path, mosquitto.port, data="", sensor="fw_sensor_oom", max_iterations=0,
        model="logistic:8", wifi_ssid="lab",
    )  # fmt: skip
    ps = logistic_ps(mosquitto.port)
    try:
        # Execute
        result, out = start_like_an_esp32(micropython, cfg)
        ps.wait_for(lambda p: p.byes, 5)
    finally:
        ps.stop()

    # Assert: a clear message, one stop, no rejoin loop
    assert "out of memory" in out and "stopped: memory" in out
    assert result["runs"] == "1" and result["resets"] == "0", out
    stats = stats_of(out)
    assert stats["memory_errors"] == 1 and stats["reconnects"] == 0
    assert [u.seq for u in ps.updates] == [1, 2] and len(ps.hellos) == 1
    assert ps.byes == ["bye"]


@pytest.mark.integration
def test_out_of_memory_exits_1_on_the_unix_port(micropython, mosquitto, tmp_path):
    # Prepare
    cfg = write_worker_config(
        tmp_path, mosquitto.port, data="", sensor="fw_sensor_oom", max_iterations=0,
        model="logistic:8",
    )  # fmt: skip
    ps = logistic_ps(mosquitto.port)
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:{MPY_TESTS}:.frozen")
    try:
        # Execute
        proc = subprocess.run(
            [micropython, str(FIRMWARE / "main.py"), str(cfg)], capture_output=True,
            text=True, timeout=90, env=env, cwd=FIRMWARE,
        )  # fmt: skip
    finally:
        ps.stop()

    # Assert
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "stopped: memory" in proc.stdout


def test_a_model_too_big_for_the_heap_is_a_clear_error(micropython, tmp_path):
    # Prepare: 150,000 parameters cannot fit a 128 KB heap
    cfg = write_worker_config(tmp_path, 1883, model="mlp:64-2000-10")
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:.frozen")

    # Execute
    proc = subprocess.run(
        [micropython, "-X", "heapsize=128K", str(FIRMWARE / "main.py"), str(cfg)],
        capture_output=True, text=True, timeout=60, env=env, cwd=FIRMWARE,
    )  # fmt: skip

    # Assert: a message and a status, not a traceback
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "out of memory at start-up" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


SENSOR = """\
import sys

_n = [0, 0]


def read(xbuf):
    # training: a deterministic signal; predicting: 5 readings, then the end
    if "edgeps_worker.infer" in sys.modules:
        _n[1] += 1
        if _n[1] > 5:
            raise StopIteration
    k = _n[0]
    _n[0] = k + 1
    for i in range(len(xbuf)):
        xbuf[i] = ((k * 7 + i * 3) % 11 - 5) / 5.0
    return 1 if xbuf[0] > 0 else 0
"""


@pytest.mark.slow
@pytest.mark.integration
def test_a_board_whose_job_is_done_soft_resets_into_predicting(
    micropython, mosquitto, tmp_path
):
    # Prepare: a sensor board, on_done predict (the default)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, data="", sensor="keep_sensor", max_iterations=0,
        model="logistic:8", wifi_ssid="lab",
    )  # fmt: skip
    board = tmp_path / "board"
    board.mkdir()
    (board / "config.json").write_text(cfg.read_text())
    (board / "keep_sensor.py").write_text(SENSOR)
    env = dict(os.environ, MICROPYPATH=f"{board}:{FIRMWARE}:{MPY_TESTS}:.frozen")
    ps = logistic_ps(mosquitto.port)
    proc = subprocess.Popen(
        [micropython, START, str(FIRMWARE), "3"], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=env, cwd=board,
    )  # fmt: skip
    try:
        # Execute: the job ends after a few pushes
        assert ps.wait_for(lambda p: len(p.updates) >= 3, 60)
        ps.stop(done=True)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    # Assert: kept, one soft reset, then the kept model predicts each reading
    assert "stopped: done" in out and "kept the job's model in model.bin" in out
    assert "soft reset: machine.soft_reset()" in out, out
    assert "RESULT runs=2 resets=1" in out, out
    assert len([x for x in out.splitlines() if x.startswith("pred ")]) == 5, out
    assert (board / "model.bin").is_file()
