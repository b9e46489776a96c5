"""A board training from a CSV with a header and text labels fits 96K, flashed
as `edgeps flash --mpy` leaves it, against `edgeps serve` on a real broker."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from edgeps.workloads.datasets import load_dataset, partition_iid

from tests.firmware.test_memory import compile_firmware, start_serve, stop
from tests.helpers.fw_host import write_worker_config

# 100K while the ring's arrays were made from zero bytes (a temporary as large
# as the ring next to it; host/BENCHMARKS.md, "Board memory")
HEAP_ARG = "96K"

pytestmark = [pytest.mark.integration, pytest.mark.firmware, pytest.mark.slow]


def test_a_csv_board_with_text_labels_trains_in_a_small_heap(
    micropython: str, mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: a shard of breast_cancer as a spreadsheet writes it
    ds = load_dataset("breast_cancer", seed=0)
    X, y = ds.shard(partition_iid(len(ds.y_train), 4, seed=0)[0])
    names = ("a_class", "b_class")  # sorted as the ids: the job names none
    head = ",".join(f"f{i}" for i in range(X.shape[1])) + ",diagnosis\n"
    rows = "".join(
        ",".join(f"{v:.6g}" for v in r) + f",{names[int(k)]}\n"
        for r, k in zip(X, y, strict=True)
    )
    (tmp_path / "local.csv").write_text(head + rows)
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="memcsv", model="logistic:30", batch=16,
        max_iterations=6, verbose=False, memory_probe=True, capacity=128,
        data=str(tmp_path / "local.csv"),
    )  # fmt: skip
    fw = compile_firmware(tmp_path / "mpy")
    serve = start_serve(mosquitto.port, "memcsv", "breast_cancer", "logistic:30")
    env = dict(os.environ, MICROPYPATH=":.frozen")
    # Execute
    try:
        proc = subprocess.run(
            [micropython, "-X", f"heapsize={HEAP_ARG}", "-m", "main", str(cfg)],
            capture_output=True, text=True, timeout=180, env=env, cwd=fw,
        )  # fmt: skip
    finally:
        stop(serve)
    # Assert
    out = proc.stdout + proc.stderr
    line = next((x for x in proc.stdout.splitlines() if x.startswith("stopped: ")), "")
    assert proc.returncode == 0 and line, out
    reason, text = line[len("stopped: ") :].split(" ", 1)
    stats = json.loads(text)
    print(f"\nCSV board, logistic:30, 128 rows held, heap {HEAP_ARG}: peak live "
          f"heap {stats['peak_mem']} B, {stats['pushes']} pushes")  # fmt: skip
    assert reason == "iterations" and stats["pushes"] == 6, out
    assert stats["memory_errors"] == 0 and stats["rejects"] == 0, stats
    assert stats["peak_mem"] < int(HEAP_ARG.rstrip("K")) * 1024
