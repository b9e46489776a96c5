"""End to end on a real mosquitto: coordinator + CPython workers reach the target."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.transport.broker import open_broker

pytestmark = pytest.mark.integration

TARGET = 0.8


def run_job(url: str, job_id: str, policy: str, **emulation: Any) -> Summary:
    """Serve one job in a thread with emulated sensors against it; its summary."""
    cfg = merge(
        {
            "broker": url,
            "job": job_id,
            "policy": policy,
            "target_accuracy": TARGET,
            "max_time": 60.0,
            "quiet": True,
            "seed": 1,
        }
    )
    job = Job(cfg, broker=open_broker(url))
    result: dict[str, Summary] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    assert job.ready.wait(20)
    emu = Emulation(url, job_id, seed=1, duration=90.0, **emulation).start()
    try:
        host.join(90)
    finally:
        job.stop()
        host.join(10)
        emu.stop()
        emu.join(20)
    assert not host.is_alive()
    return result["s"]


@pytest.mark.parametrize("policy", ["bsp", "ssp:2", "dsp"])
def test_policy_reaches_target_accuracy(mosquitto: Any, policy: str) -> None:
    # Execute
    summary = run_job(mosquitto.url, "p" + policy.replace(":", ""), policy, n_workers=4)

    # Assert
    assert summary.stop_reason == "target_accuracy"
    assert summary.accuracy is not None and summary.accuracy >= TARGET
    assert set(summary.workers) == {"w00", "w01", "w02", "w03"}
    assert all(w["accepted"] > 0 for w in summary.workers.values())
    assert summary.version == summary.updates
    assert summary.dropped == {}


def test_dsp_with_stragglers_keeps_fast_workers_busy(mosquitto: Any) -> None:
    summary = run_job(
        mosquitto.url, "pstrag", "dsp", n_workers=4, scenario="stragglers"
    )

    accepted = sorted(w["accepted"] for w in summary.workers.values())
    assert summary.stop_reason == "target_accuracy"
    # the straggler (4x slower) does not hold the others to its pace
    assert accepted[-1] >= 2 * accepted[0]
