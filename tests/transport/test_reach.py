"""A mistyped or unreachable broker is said as such: name, port, and why."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from edgeps.cli import main as cli
from edgeps.transport.reach import unreachable, wait_reachable

from tests.conftest import REPO, free_port

BAD_NAME = "mqtt://no-such-host.invalid:1883"


def test_an_unresolvable_host_is_named() -> None:
    why = unreachable(BAD_NAME)
    assert why is not None
    assert why.startswith(f"cannot reach the broker {BAD_NAME}: the host name ")
    assert "'no-such-host.invalid' does not resolve" in why


def test_a_closed_port_is_named() -> None:
    port = free_port()
    why = unreachable(f"mqtt://127.0.0.1:{port}")
    assert why == (
        f"cannot reach the broker mqtt://127.0.0.1:{port}: nothing accepts a "
        f"connection at 127.0.0.1:{port} (Connection refused)"
    )


def test_every_node_of_a_cluster_is_named() -> None:
    a, b = free_port(), free_port()
    why = unreachable(f"mqtt://127.0.0.1:{a},mqtt://127.0.0.1:{b}")
    assert why is not None
    assert f"mqtt://127.0.0.1:{a}: nothing" in why
    assert f"mqtt://127.0.0.1:{b}: nothing" in why


@pytest.mark.integration
def test_a_running_broker_is_reachable_and_one_live_node_is_enough(
    mosquitto: Any,
) -> None:
    assert unreachable(mosquitto.url) is None
    assert unreachable(f"mqtt://127.0.0.1:{free_port()},{mosquitto.url}") is None


def test_waiting_gives_up_within_its_bound_and_notes_each_probe() -> None:
    # Prepare
    notes: list[float] = []
    # Execute
    why = wait_reachable(
        f"mqtt://127.0.0.1:{free_port()}", 1.5, note=lambda w, d: notes.append(d)
    )
    # Assert
    assert why is not None and "Connection refused" in why
    assert notes and sum(notes) <= 1.5 + 1e-6


@pytest.mark.parametrize("command", ["serve", "demo"])
def test_serve_and_demo_say_the_broker_is_unreachable_before_key_advice(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute
    code = cli([command, "--broker", BAD_NAME, "--max-time", "5"])
    # Assert
    err = capsys.readouterr().err
    assert code == 2
    assert f"edgeps {command}: error: cannot reach the broker {BAD_NAME}" in err
    assert "does not resolve" in err and "per-device keys" not in err


def worker(*flags: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "host"))
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "worker", "--job", "j", "--id", "w"]
        + ["--emulated", "sensors:0/4", *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(REPO),
    )


@pytest.mark.integration
def test_worker_gives_up_on_a_closed_port_and_exits_3() -> None:
    # Prepare
    url = f"mqtt://127.0.0.1:{free_port()}"
    # Execute
    proc = worker("--broker", url, "--give-up", "2")
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    # Assert
    assert proc.returncode == 3, err
    assert "WARNING" in err and f"cannot reach the broker {url}" in err
    assert "gave up after 2 s (--persist keeps retrying)" in err
    assert "Traceback" not in err


@pytest.mark.integration
def test_a_persistent_worker_keeps_retrying_an_absent_broker() -> None:
    # Prepare
    proc = worker("--broker", BAD_NAME, "--give-up", "1", "--persist")
    try:
        # Execute: well past --give-up
        time.sleep(4)
        alive = proc.poll() is None
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    # Assert: still running, and it said why once
    assert alive, err
    assert "retrying with backoff (--persist)" in err
    assert "does not resolve" in err


@pytest.mark.integration
def test_a_fetching_worker_gives_up_on_an_absent_broker(tmp_path: Path) -> None:
    # Prepare
    rows = tmp_path / "rows.csv"
    rows.write_text("1,2\n")
    url = f"mqtt://127.0.0.1:{free_port()}"
    # Execute
    done = subprocess.run(
        [sys.executable, "-m", "edgeps", "worker", "--infer", "--fetch",
         "--broker", url, "--job", "j", "--id", "w", "--data", str(rows),
         "--model-file", str(tmp_path / "model.bin"), "--give-up", "1"],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, PYTHONPATH=str(REPO / "host")),
    )  # fmt: skip
    # Assert
    assert done.returncode == 3, done.stderr
    assert f"cannot reach the broker {url}" in done.stderr
