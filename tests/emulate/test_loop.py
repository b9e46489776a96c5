"""The event-loop emulator against a real mosquitto and a real `edgeps serve`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from edgeps.commands.emulate import pick_engine
from edgeps.emulate.runner import LoopEmulation
from edgeps.workloads.scenarios import WorkerProfile

from tests.pyworker.test_worker_on_broker import wait_until


def test_the_engine_follows_size_processes_and_shaped_links() -> None:
    assert pick_engine("auto", 8, 1, False) == "threads"
    assert pick_engine("auto", 2000, 1, False) == "loop"
    assert pick_engine("auto", 8, 2, False) == "loop"
    assert pick_engine("auto", 2000, 1, True) == "threads"
    assert pick_engine("loop", 8, 1, False) == "loop"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_workers": 0}, "n_workers"),
        ({"processes": 0}, "processes"),
        ({"link_rate": 250e3}, "thread engine"),
        ({"compute_time": 0.0}, "compute_time"),
    ],
)
def test_bad_loop_options_are_refused(kwargs: dict[str, object], message: str) -> None:
    opts: dict[str, object] = {"n_workers": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        LoopEmulation("mqtt://127.0.0.1:9", "job1", **opts)  # type: ignore[arg-type]


def _applied(metrics: Path) -> int:
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["updates"])
        except (ValueError, KeyError):
            continue
    return 0


def _serve(url: str, job: str, metrics: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", url,
         "--job", job, "--policy", "asp", "--model", "softmax", "--lr", "0.02",
         "--max-time", "90", "--json", "--quiet", "--metrics-out", str(metrics),
         "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _finish(serve: subprocess.Popen[bytes]) -> dict[str, Any]:
    if serve.poll() is None:
        serve.send_signal(signal.SIGINT)
    try:
        out, _ = serve.communicate(timeout=30)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
    result: dict[str, Any] = json.loads(out)
    return result


@pytest.mark.integration
def test_200_sensors_in_one_process_reach_an_applied_count(  # type: ignore[no-untyped-def]
    mosquitto, tmp_path
) -> None:
    # Prepare: a real serve (ASP) and 200 sensors on one event loop
    metrics = tmp_path / "metrics.jsonl"
    serve = _serve(mosquitto.url, "many", metrics)
    emu = LoopEmulation(
        mosquitto.url, "many", n_workers=200, compute_time=0.2, duration=60.0
    )
    try:
        # Execute
        emu.start()
        reached = wait_until(lambda: _applied(metrics) >= 2000, timeout=60)
        emu.stop()
        ended = emu.join(timeout=30)
    finally:
        emu.stop()
        summary = _finish(serve)

    # Assert: every sensor pushed on its own connection; serve saw them all
    assert reached and ended
    assert len(summary["workers"]) == 200
    assert all(r.stats.get("pushes", 0) > 0 for r in emu.reports.values())
    assert all(
        r.lives == 1 and r.stop_reason == "stopped" for r in emu.reports.values()
    )
    assert summary["updates"] >= 2000
    inbound = summary["inbound"]
    assert inbound["push_to_release_n"] > 0
    assert inbound["push_to_release_ms_p50"] <= inbound["push_to_release_ms_p95"]
    cost = emu.cost
    assert cost["updates"] >= 2000 and cost["cpu_ms_per_update"] > 0
    # read in this test process, whose freed memory the sensors may reuse: the
    # growth can be 0 here (the emulate command measures a process of its own)
    assert cost["rss_mib_total"] > 0 and cost["rss_kib_per_sensor"] >= 0


@pytest.mark.integration
def test_a_crashed_sensor_rejoins_as_a_new_process(  # type: ignore[no-untyped-def]
    mosquitto, tmp_path
) -> None:
    # Prepare: s1 crashes at 1.5 s (no DISCONNECT: the broker sends its will)
    # and rejoins at 3 s; s2 runs throughout
    metrics = tmp_path / "metrics.jsonl"
    serve = _serve(mosquitto.url, "churn", metrics)
    fast = WorkerProfile(compute_time=0.05)
    profiles = {"s1": WorkerProfile(compute_time=0.05, crash_at=1.5, rejoin_at=3.0),
                "s2": fast}  # fmt: skip
    emu = LoopEmulation(mosquitto.url, "churn", profiles=profiles, duration=60.0)
    try:
        # Execute
        emu.start()
        rejoined = wait_until(lambda: emu.elapsed() > 3.5, timeout=60)
        pushed_after = wait_until(lambda: _applied(metrics) >= 150, timeout=30)
        emu.stop()
        ended = emu.join(timeout=30)
    finally:
        emu.stop()
        summary = _finish(serve)

    # Assert
    assert rejoined and pushed_after and ended
    s1, s2 = emu.reports["s1"], emu.reports["s2"]
    assert s1.lives == 2 and s2.lives == 1
    assert s1.profile == "churn" and s1.stop_reason == "stopped"
    assert s1.stats["pushes"] > 0 and s1.clock > 0  # its second life pushed too
    assert summary["workers"]["s1"]["accepted"] > 0


@pytest.mark.slow
@pytest.mark.integration
def test_50_loop_sensors_end_on_the_stop_serve_sends_when_it_reaches_its_target(  # type: ignore[no-untyped-def]
    mosquitto,
) -> None:
    # Prepare: serve (DSP, its default) to a target accuracy, and 50 sensors on
    # one event loop, many of them held at the barrier when serve stops them
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", "stop50", "--target-accuracy", "0.93", "--max-time", "60",
         "--json", "--quiet", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    emu = LoopEmulation(mosquitto.url, "stop50", n_workers=50, duration=120.0)
    try:
        # Execute: serve ends on its own (MODEL done, a STOP done to each)
        emu.start()
        out, _ = serve.communicate(timeout=90)
        ended = emu.join(timeout=30)
    finally:
        emu.stop()
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
        emu.join(timeout=10)

    # Assert: every sensor stopped on its STOP, and the emulation ended with
    # them, long before its own duration
    summary = json.loads(out)
    assert summary["stop_reason"] == "target_accuracy"
    assert ended
    assert len(emu.reports) == 50
    assert all(r.lives == 1 and r.stop_reason == "done" for r in emu.reports.values())
    assert emu.results and not any(r.error for r in emu.results)


def test_resident_memory_per_sensor_is_read_while_the_sensors_lived() -> None:
    # at the end a process's links and buffers are gone: its RSS can be back
    # at (or under) where it started, so the cost uses the peak it read
    from edgeps.emulate.runner import ShardResult

    emu = LoopEmulation("mqtt://127.0.0.1:1883", "j", n_workers=100)
    mib = 1 << 20
    emu.results = [
        ShardResult(sensors=50, rss_base=100 * mib, rss_peak=105 * mib,
                    rss_end=99 * mib),
        ShardResult(sensors=50, rss_base=100 * mib, rss_peak=103 * mib,
                    rss_end=101 * mib),
    ]  # fmt: skip
    assert emu.cost["rss_kib_per_sensor"] == pytest.approx(8 * 1024 / 100, abs=0.1)
