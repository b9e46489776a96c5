"""End to end: a MicroPython board trains H = 8 local steps per push next to
CPython workers, under `edgeps serve --local-steps 8`, on a real mosquitto.

The job's WELCOME carries the local rounds; every push is then the delta of
eight SGD steps (UPDATE steps 8), which the PS takes only because the job
asked for it (a delta to a job without local rounds is refused as
``steps``), and the federated average of those deltas reaches the target.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.firmware.test_train_with_serve import (
    board_stats,
    start_board_and_cpython_workers,
    write_board_data,
)
from tests.helpers.fw_host import write_worker_config

pytestmark = [pytest.mark.integration, pytest.mark.firmware, pytest.mark.slow]


@pytest.mark.parametrize("policy", ["fedavg", "fedbuff:k=2"])
def test_board_trains_local_rounds_next_to_cpython_workers(
    micropython, mosquitto, tmp_path, policy
):
    # Prepare: the board holds shard 0 of 4, two CPython workers shards 1 and 2
    write_board_data(tmp_path, 0)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="loc", model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=True,
    )  # fmt: skip
    board, cpython = start_board_and_cpython_workers(
        micropython, cfg, tmp_path, mosquitto.port, "loc"
    )
    serve = None
    try:
        # Execute
        serve = subprocess.Popen(
            [sys.executable, "-m", "edgeps", "serve", "--broker",
             f"mqtt://127.0.0.1:{mosquitto.port}", "--job", "loc", "--dataset",
             "digits", "--model", "mlp:64-32-10", "--policy", policy,
             "--local-steps", "8", "--target-accuracy", "0.9", "--max-time",
             "150", "--quiet", "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        code, text = board.finish(timeout=200)
        out, err = serve.communicate(timeout=60)
    finally:
        for p in [board, *cpython]:
            p.kill()
        if serve is not None and serve.poll() is None:
            serve.kill()
            serve.wait(timeout=10)
    # Assert: the board took the job's rounds, and every push was applied
    assert code == 0, text
    assert "local rounds: 8 steps" in text, text
    assert "stopped: done" in text, text
    stats = board_stats(text)
    assert stats["bad_grads"] == 0 and stats["rejects"] == 0, text
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["accuracy"] >= 0.9
    rows = summary["workers"]
    assert set(rows) == {"mpy-1", "py-1", "py-2"}, rows
    assert all(r["accepted"] > 0 and r["rejected"] == 0 for r in rows.values()), rows
    assert "steps" not in summary.get("dropped", {})
    print(f"\n{policy} H=8: accuracy {summary['accuracy']:.3f}, board pushes "
          f"{stats['pushes']}")  # fmt: skip
