"""A board whose step outlasts the host's liveness timeout stays alive: heartbeats
go on during the step (edgeps_worker.alive), against `edgeps serve`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import FIRMWARE, REPO
from tests.helpers.fw_host import write_worker_config

pytestmark = [pytest.mark.integration, pytest.mark.firmware]
MPY_ENV = dict(
    os.environ, MICROPYPATH=f"{FIRMWARE}:{REPO / 'tests' / 'helpers' / 'mpy'}:.frozen"
)


def test_a_step_longer_than_the_liveness_timeout_is_not_a_death(
    micropython, mosquitto, tmp_path
):
    # Prepare: each step takes 4 s (a slow sensor); the host declares a
    # computing worker dead after 2 s of silence
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="slow", model="mlp:64-32-10", data="",
        sensor="fw_sensor_slow", max_iterations=3, heartbeat_ms=300,
        release_timeout_ms=20000, step_heartbeats=True,
    )  # fmt: skip
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker",
         f"mqtt://127.0.0.1:{mosquitto.port}", "--job", "slow", "--dataset",
         "digits", "--model", "mlp:64-32-10", "--policy", "asp",
         "--liveness-timeout", "2.0", "--max-time", "120", "--quiet", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # Execute
        board = subprocess.run(
            [micropython, str(FIRMWARE / "main.py"), str(cfg)], capture_output=True,
            text=True, timeout=120, env=MPY_ENV, cwd=tmp_path,
        )  # fmt: skip
        serve.send_signal(signal.SIGINT)
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(timeout=10)

    # Assert: every push accepted in the one session the board joined
    assert board.returncode == 0, board.stdout + board.stderr
    assert "stopped: iterations" in board.stdout
    stats = json.loads(board.stdout.split("stopped: iterations ", 1)[1].splitlines()[0])
    assert stats["rejects"] == 0 and stats["hellos"] == 1, board.stdout
    assert stats["heartbeats"] >= 3 * 5  # 4 s steps, a beat every 0.3 s
    summary = json.loads(out.strip().splitlines()[-1])
    row = summary["workers"]["mpy-1"]
    assert row["accepted"] == 3 and row["rejected"] == 0, (row, err)
