"""A board of another model hears what the job trains: real serve, real broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from edgeps_worker import datafile

from tests.firmware.test_train_with_serve import run_board_with_serve, start_serve
from tests.helpers.fw_host import write_worker_config

pytestmark = [pytest.mark.integration, pytest.mark.firmware, pytest.mark.slow]


def test_a_board_of_another_model_says_what_the_job_trains(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: the job trains mlp:64-32-10; the board is configured mlp:64-16-10
    datafile.write_file(str(tmp_path / "data.bin"), [[0.5] * 64] * 4, [0, 1, 2, 3])
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="wrong", model="mlp:64-16-10",
        max_iterations=0, release_timeout_ms=15000,
    )  # fmt: skip
    serve = start_serve(mosquitto.port, "wrong", "dsp", "0.99", "--max-time", "20")
    # Execute: serve is stopped once the board has ended (its job runs on)
    board, summary = run_board_with_serve(
        micropython, cfg, tmp_path, serve, stop_serve=True
    )
    # Assert
    said = board.stdout + board.stderr
    # the board's own model is in its first line, the job's in the STOP
    assert "job wrong mlp:64-16-10" in said
    assert "stopped by the host: model mlp:64-32-10" in said
    assert board.returncode != 0, said
    assert "Traceback" not in said
