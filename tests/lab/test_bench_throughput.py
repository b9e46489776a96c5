"""`edgeps bench throughput` runs end to end on a small size and reports both rates."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.integration
@pytest.mark.parametrize(("chunk", "chunks"), [("0", 1), ("512", 3)])
def test_throughput_bench_reports_echo_and_ps_rates(chunk: str, chunks: int) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "bench",
            "throughput",
            "--sizes",
            "256",
            "--messages",
            "200",
            "--repeat",
            "1",
            "--chunk",
            chunk,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )

    assert done.returncode == 0, done.stderr
    (row,) = json.loads(done.stdout)
    assert row["n_params"] == 256 and row["messages"] == 200
    assert row["chunks_per_update"] == chunks
    assert row["echo_msgs_per_s"] > 0
    assert row["receive_msgs_per_s"] > 0
    assert row["ps_updates_per_s"] > 0
    assert row["ratio"] == pytest.approx(
        row["ps_updates_per_s"] / row["echo_msgs_per_s"], rel=0.01
    )


def test_throughput_bench_rejects_bad_sizes() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "edgeps", "bench", "throughput", "--sizes", "big"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "--sizes" in done.stdout + done.stderr
