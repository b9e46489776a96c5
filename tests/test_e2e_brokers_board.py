"""A MicroPython board worker and `edgeps serve` on different nodes of an aedes cluster.

The board's own MQTT 3.1.1 client (firmware/edgeps_worker/mqtt.py) talks to
node B; serve, started from the command line with both nodes in --broker,
uses node A. Every message crosses the cluster through redis.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from aedes_cluster import start_cluster
from conftest import FIRMWARE
from fw_host import write_worker_config
from test_fw_train_serve import MPY_ENV, start_serve, write_board_data

pytestmark = [pytest.mark.integration, pytest.mark.firmware, pytest.mark.slow]


def test_board_on_one_node_trains_with_serve_on_the_other(
    micropython: str, tmp_path: Path
) -> None:
    # Prepare
    cluster = start_cluster(tmp_path, n_nodes=2)
    a, b = cluster.nodes
    write_board_data(tmp_path, 0)
    cfg = write_worker_config(
        tmp_path, b.port, job="digits", model="mlp:64-32-10", batch=16,
        max_iterations=0, verbose=False,
    )  # fmt: skip
    # the later --broker (both nodes, A first) overrides start_serve's own
    serve = start_serve(a.port, "digits", "asp", "0.85", "--broker", cluster.url(0, 1))
    try:
        # Execute
        worker = subprocess.run(
            [micropython, str(FIRMWARE / "main.py"), str(cfg)], capture_output=True,
            text=True, timeout=180, env=MPY_ENV, cwd=tmp_path,
        )  # fmt: skip
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(timeout=10)
        cluster.stop()

    # Assert: joined over the cluster, trained to the target, stopped on "done"
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert "stopped: done" in worker.stdout
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["stop_reason"] == "target_accuracy", err
    assert summary["accuracy"] >= 0.85
    assert summary["workers"]["mpy-1"]["rejected"] == 0
