"""`edgeps serve` as a process: Ctrl-C writes a checkpoint, resume, config + flags."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.runtime.checkpoint import load_checkpoint


def serve(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--quiet", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def last_metrics(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    return json.loads(lines[-1]) if lines else None


def wait_version(path: Path, version: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rec = last_metrics(path)
        if rec is not None and rec["version"] >= version:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.integration
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_writes_a_final_checkpoint_and_resume_continues(
    mosquitto: Any, tmp_path: Path, signum: int
) -> None:
    # Prepare: a job with no stop condition, two sensors training on it
    ckpt, metrics = tmp_path / "run.npz", tmp_path / "run.jsonl"
    proc = serve(
        "--broker",
        mosquitto.url,
        "--job",
        "ctrlc",
        "--policy",
        "ssp:2",
        "--optimizer",
        "adam",
        "--lr",
        "0.01",
        "--checkpoint",
        str(ckpt),
        "--metrics-out",
        str(metrics),
        "--metrics-interval",
        "0.2",
        "--json",
    )
    emu = None
    try:
        emu = Emulation(mosquitto.url, "ctrlc", n_workers=2, duration=60.0).start()
        assert wait_version(metrics, 10, 60)

        # Execute
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if emu is not None:
            emu.stop()
            emu.join(20)

    # Assert
    assert proc.returncode == 0, err
    summary = json.loads(out)
    saved = load_checkpoint(ckpt)
    assert summary["stop_reason"] == "interrupted"
    assert saved.version == summary["version"] >= 10
    assert saved.optimizer_state["name"] == "adam"
    assert saved.optimizer_state["t"] == saved.version
    assert set(saved.worker_stats) == {"w00", "w01"}

    # Execute: resume from it for a moment, no workers
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "serve",
            "--quiet",
            "--broker",
            mosquitto.url,
            "--job",
            "ctrlc",
            "--resume",
            str(ckpt),
            "--optimizer",
            "adam",
            "--max-time",
            "0.5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )

    # Assert: it starts where the checkpoint left off
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["version"] == saved.version


@pytest.mark.integration
def test_config_file_with_flag_override(mosquitto: Any, tmp_path: Path) -> None:
    # Prepare: the file asks for a long run, the flag for a short one
    conf = tmp_path / "job.toml"
    conf.write_text(
        f'broker = "{mosquitto.url}"\njob = "cfg"\npolicy = "ssp:4"\n'
        "max-time = 600.0\nlr = 0.05\n"
    )

    # Execute
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "serve",
            "--quiet",
            "--config",
            str(conf),
            "--max-time",
            "0.5",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )

    # Assert
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["policy"].startswith("ssp")
    assert "4" in summary["policy"]
    assert summary["stop_reason"] == "max_time"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--policy", "sometimes"], "policy"),
        (["--lr", "-3"], "--lr"),
        (["--target-accuracy", "2"], "--target-accuracy"),
        (["--resume", "/nonexistent/ck.npz"], "--resume"),
        (["--dataset", "mnist-of-mars"], "dataset"),
        (["--model", "mlp:5-3-2"], "features"),
        (["--job", "bad job!"], "--job"),
        (["--tls-cert", "/nonexistent.pem"], "tls"),
        (["--config", "/nonexistent.toml"], "--config"),
    ],
)
def test_wrong_flags_are_clear_errors(args: list[str], message: str) -> None:
    # the broker address is never contacted: validation comes first
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "serve",
            "--broker",
            "mqtt://127.0.0.1:9",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert message.lower() in done.stderr.lower()
    assert "Traceback" not in done.stderr
