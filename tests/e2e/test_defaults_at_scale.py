"""End to end on a real mosquitto: the job defaults learn at 32 and 64 sensors.

Serve's former default step diverged from 32 emulated sensors on (non-finite
pushes, the model never recovered, nothing said so); with the one set of job
defaults the same jobs reach the target with nothing refused.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.transport.broker import open_broker

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TARGET = 0.93


def serve_with_sensors(url: str, job_id: str, n: int, scenario: str) -> Summary:
    cfg = merge(
        {
            "broker": url,
            "job": job_id,
            "target_accuracy": TARGET,
            "max_time": 90.0,
            "quiet": True,
        }
    )
    job = Job(cfg, broker=open_broker(url))
    result: dict[str, Summary] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    assert job.ready.wait(20)
    emu = Emulation(url, job_id, n_workers=n, scenario=scenario, duration=120.0)
    emu.start()
    try:
        host.join(120)
    finally:
        job.stop()
        host.join(10)
        emu.stop()
        emu.join(30)
    assert not host.is_alive()
    return result["s"]


@pytest.mark.parametrize(("n", "scenario"), [(32, "homogeneous"), (64, "homogeneous")])
def test_the_default_step_reaches_the_target_with_nothing_refused(
    mosquitto: Any, n: int, scenario: str
) -> None:
    # Execute
    summary = serve_with_sensors(mosquitto.url, f"scale{n}", n, scenario)

    # Assert
    assert summary.stop_reason == "target_accuracy", summary.advice
    assert summary.state == "learning"
    assert sum(w["rejected"] for w in summary.workers.values()) == 0
    assert len(summary.workers) == n
