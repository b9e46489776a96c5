"""A MicroPython board worker and `edgeps serve` on different nodes of an aedes cluster.

The board's own MQTT 3.1.1 client (firmware/edgeps_worker/mqtt.py) talks to
node B; serve, started from the command line with both nodes in --broker,
uses node A. Every message crosses the cluster through redis.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.firmware.test_train_with_serve import (
    run_board_with_serve,
    start_serve,
    write_board_data,
)
from tests.helpers.aedes_cluster import start_cluster
from tests.helpers.fw_host import write_worker_config

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
        worker, summary = run_board_with_serve(micropython, cfg, tmp_path, serve)
    finally:
        cluster.stop()

    # Assert: joined over the cluster, trained to the target, stopped on "done"
    assert worker.returncode == 0, worker.stdout + worker.stderr
    assert "stopped: done" in worker.stdout
    assert summary["stop_reason"] == "target_accuracy", summary["_stderr"]
    assert summary["accuracy"] >= 0.85
    assert summary["workers"]["mpy-1"]["rejected"] == 0
