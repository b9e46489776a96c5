"""SIGTERM to `edgeps demo` stops the broker it started and prints the summary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from edgeps.transport.broker import amqtt_available, mosquitto_path


def children(pid: int) -> set[int]:
    """The pids of a process's children (every thread's), from /proc."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out.update(int(c) for c in (task / "children").read_text().split())
        except OSError:
            continue
    return out


def running(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["mosquitto", "amqtt"])
def test_sigterm_stops_the_demo_broker_and_prints_the_summary(kind: str) -> None:
    # Prepare
    if kind == "mosquitto" and mosquitto_path() is None:
        pytest.fail("mosquitto is needed for this test")
    if kind == "amqtt" and not amqtt_available():
        pytest.skip("amqtt (the demo extra) is not installed")
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "demo", "--broker", kind, "--workers", "2",
         "--max-time", "120", "--target-accuracy", "0.999"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    err: list[str] = []
    started = threading.Event()

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err.append(line)
            if "broker at" in line:
                started.set()

    reader = threading.Thread(target=read_err, daemon=True)
    reader.start()
    try:
        assert started.wait(60), "".join(err)
        brokers = children(proc.pid)
        assert brokers, "the demo started no broker process"
        time.sleep(2)  # a few rounds of training
        # Execute
        os.kill(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        reader.join(10)
        # Assert: the summary, and no broker left behind
        deadline = time.monotonic() + 10
        while any(running(b) for b in brokers) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [b for b in brokers if running(b)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"broker process(es) {left} still running"
    assert proc.returncode == 0, "".join(err)
    assert "stop: interrupted" in out and "accuracy" in out, out
