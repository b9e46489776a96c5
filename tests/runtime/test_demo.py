"""`edgeps demo`: one command, embedded broker, ends by itself with a summary."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from edgeps.transport.broker import amqtt_available


@pytest.mark.integration
def test_demo_trains_to_target_on_the_embedded_broker() -> None:
    if not amqtt_available():
        pytest.skip("amqtt (the demo extra) is not installed")

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "demo",
            "--workers",
            "4",
            "--target-accuracy",
            "0.8",
            "--max-time",
            "100",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=200,
    )

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert "amqtt broker" in done.stderr
    assert summary["stop_reason"] == "target_accuracy"
    assert summary["accuracy"] >= 0.8
    assert summary["policy"].startswith("dsp")
    assert sorted(summary["workers"]) == ["w00", "w01", "w02", "w03"]
    profiles = [w["profile"] for w in summary["workers"].values()]
    assert any(p.startswith("straggler") for p in profiles)


def test_demo_rejects_bad_arguments() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "edgeps", "demo", "--workers", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 2
    assert "--workers" in done.stderr
