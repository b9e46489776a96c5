"""End to end: a MicroPython board trains with `edgeps serve --compress int8` next to
CPython workers, on a real mosquitto, until the host's target accuracy.

An int8 job refuses any UPDATE in another code (``codec``), so a board whose
pushes are all accepted encoded every one of them as I8 blocks with its
error feedback; the CPython workers encode theirs with the C kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import FIRMWARE
from tests.firmware.test_train_with_serve import HelloWatch, write_board_data
from tests.helpers.fw_host import write_worker_config

pytestmark = [pytest.mark.integration, pytest.mark.firmware]
MPY_ENV = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:.frozen")


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.parametrize("compress", ["int8", "f16"])
def test_board_trains_with_compressed_updates_next_to_cpython_workers(
    micropython, mosquitto, tmp_path, compress
):
    # Prepare: the board holds shard 0 of 4, two CPython workers shards 1 and 2
    write_board_data(tmp_path, 0)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="cmp", model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=False,
    )  # fmt: skip
    url = f"mqtt://127.0.0.1:{mosquitto.port}"
    watch = HelloWatch(mosquitto.port, "cmp")
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", url, "--job", "cmp",
         "--dataset", "digits", "--model", "mlp:64-32-10", "--policy", "asp",
         "--compress", compress, "--target-accuracy", "0.9", "--max-time", "150",
         "--quiet", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    cpython = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "edgeps",
                "worker",
                "--broker",
                url,
                "--job",
                "cmp",
                "--id",
                f"py-{i}",
                "--emulated",
                f"digits:{i}/4",
                "--batch",
                "16",
                "--log-level",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for i in (1, 2)
    ]
    try:
        # the board starts once both CPython workers joined: on a loaded box the
        # job could otherwise reach the target before one of them imports numpy
        assert watch.wait({"py-1", "py-2"}, 90), watch.seen
        # Execute
        board = subprocess.run(
            [micropython, str(FIRMWARE / "main.py"), str(cfg)], capture_output=True,
            text=True, timeout=200, env=MPY_ENV, cwd=tmp_path,
        )  # fmt: skip
        out, err = serve.communicate(timeout=60)
    finally:
        watch.close()
        for p in [serve, *cpython]:
            stop(p)
    # Assert: the target was reached with every worker's pushes accepted
    assert board.returncode == 0, board.stdout + board.stderr
    assert "stopped: done" in board.stdout, board.stdout
    stats = json.loads(board.stdout.split("stopped: done ", 1)[1].splitlines()[0])
    assert stats["bad_grads"] == 0 and stats["rejects"] == 0, stats
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["accuracy"] >= 0.9
    rows = summary["workers"]
    assert set(rows) == {"mpy-1", "py-1", "py-2"}, rows
    assert all(r["accepted"] > 0 and r["rejected"] == 0 for r in rows.values()), rows
    assert "codec" not in summary.get("dropped", {})
    print(f"\n{compress}: accuracy {summary['accuracy']:.3f}, board pushes "
          f"{stats['pushes']}, accepted {rows['mpy-1']['accepted']}")  # fmt: skip
