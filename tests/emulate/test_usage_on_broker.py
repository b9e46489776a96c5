"""Both emulator engines meter each sensor's usage on a real broker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.emulate.runner import LoopEmulation
from edgeps.workloads.scenarios import WorkerProfile

from tests.pyworker.test_worker_on_broker import ScriptedPS


@pytest.fixture
def ps(mosquitto):  # type: ignore[no-untyped-def]
    server = ScriptedPS(mosquitto.port, "job1")
    try:
        yield server
    finally:
        server.close()


PROFILES = {"u0": WorkerProfile(compute_time=0.05, compute_jitter=0.0),
            "u1": WorkerProfile(compute_time=0.2, compute_jitter=0.0)}  # fmt: skip


@pytest.mark.integration
@pytest.mark.parametrize("engine", [Emulation, LoopEmulation])
def test_each_sensor_reports_its_bytes_time_and_joules(  # type: ignore[no-untyped-def]
    mosquitto,
    ps,
    engine,
) -> None:
    # Prepare: a fast and a slow sensor, ten pushes each, asleep at the barrier
    emu = engine(mosquitto.url, "job1", profiles=PROFILES, max_iterations=10,
                 sleep_at_barrier=True)  # fmt: skip

    # Execute
    emu.start()
    ended = emu.join(timeout=60)

    # Assert: every push went up and every release came down, metered
    assert ended
    for wid, profile in PROFILES.items():
        r = emu.reports[wid]
        u = r.usage
        assert r.stats["pushes"] == 10 == ps.updates[wid]
        assert u["messages_up"] >= 10 and u["messages_down"] >= 10
        assert u["bytes_up"] > 10 * 4 * 2 and u["bytes_down"] > 0
        # ten steps of its compute time (the last one's release never comes)
        assert u["compute"] >= 10 * profile.compute_time * 0.9
        assert u["alive"] >= u["compute"] + u["waiting"] - 1e-6
        assert u["joules"] > 0 and u["sleep_at_barrier"] and u["board"] == "esp32"
    slow, fast = emu.reports["u1"].usage, emu.reports["u0"].usage
    assert slow["compute"] > fast["compute"]


def test_an_unknown_board_is_refused_before_starting(mosquitto) -> None:  # type: ignore[no-untyped-def]
    for engine in (Emulation, LoopEmulation):
        with pytest.raises(ValueError, match="unknown board"):
            engine(mosquitto.url, "job1", n_workers=1, board="toaster")


@pytest.mark.integration
def test_the_cli_prints_each_sensors_usage_and_the_means(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    cmd = [sys.executable, "-m", "edgeps", "emulate", "--broker", mosquitto.url,
           "--job", "job1", "--workers", "2", "--max-iterations", "5",
           "--board", "pi", "--sleep-at-barrier", "--json"]  # fmt: skip

    # Execute
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    # Assert: per sensor, and the means over sensors next to them
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    usages = [w["usage"] for w in out["workers"]]
    assert all(u["board"] == "pi" and u["sleep_at_barrier"] for u in usages)
    mean = sum(u["bytes_up"] for u in usages) / 2
    assert out["per_board"]["bytes_up"] == pytest.approx(mean)
    assert out["per_board"]["joules"] > 0


def test_the_means_skip_a_sensor_that_never_ran() -> None:
    from types import SimpleNamespace

    from edgeps.commands.emulate import per_board

    usage = {"bytes_up": 10, "bytes_down": 20, "alive": 2.0, "compute": 1.0,
             "waiting": 0.5, "joules": 3.0}  # fmt: skip
    ran = SimpleNamespace(usage=usage)
    never = SimpleNamespace(usage={})

    assert per_board([ran, never])["joules"] == 3.0
    assert per_board([never]) == dict.fromkeys(
        ("bytes_up", "bytes_down", "alive", "compute", "waiting", "joules")
    )
