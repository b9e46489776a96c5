"""Emulated sensors: real worker loops shaped by scenario profiles, against a broker."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from edgeps.emulate.common import profile_class
from edgeps.emulate.emulation import Emulation
from edgeps.transport.options import ConnectionOptions
from edgeps.workloads.scenarios import WorkerProfile

from tests.pyworker.test_worker_on_broker import ScriptedPS, wait_until


@pytest.fixture
def ps(mosquitto):  # type: ignore[no-untyped-def]
    server = ScriptedPS(mosquitto.port, "job1")
    try:
        yield server
    finally:
        server.close()


def test_profile_labels() -> None:
    assert profile_class(WorkerProfile()) == "normal"
    label = profile_class(
        WorkerProfile(straggler_factor=4, crash_at=1.0, rejoin_at=2.0, loss_p=0.1)
    )
    assert label == "straggler x4, churn, loss 0.1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scenario": "nosuch"}, "unknown scenario"),
        ({"dataset": "nosuch"}, "unknown dataset"),
        ({"duration": 0}, "duration"),
        ({"batch": 0}, "batch"),
        ({"profiles": {"bad id": WorkerProfile()}}, "worker id"),
    ],
)
def test_bad_options_are_refused_before_starting(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Emulation("mqtt://127.0.0.1:9", "job1", n_workers=2, **kwargs)


def test_tls_options_without_mqtts_are_refused() -> None:
    opts = ConnectionOptions("mqtt://127.0.0.1:9", tls_ca="/tmp/ca.pem")
    with pytest.raises(ValueError, match="mqtts"):
        Emulation(opts, "job1", n_workers=2)


def test_bad_broker_url_is_refused() -> None:
    with pytest.raises(ValueError, match="mqtt"):
        Emulation("http://127.0.0.1:1883", "job1", n_workers=2)


@pytest.mark.integration
def test_stragglers_push_less_and_the_run_ends_after_its_duration(  # type: ignore[no-untyped-def]
    mosquitto, ps
) -> None:
    # Prepare
    emu = Emulation(
        mosquitto.url, "job1", n_workers=4, scenario="stragglers", duration=4.0
    )
    slow = [w for w, p in emu.scenario.profiles.items() if p.straggler_factor > 1]
    fast = [w for w in emu.scenario.profiles if w not in slow]
    # Execute
    emu.start()
    ended = emu.join(timeout=40)
    # Assert
    assert ended and not emu.running
    assert len(slow) == 1
    assert all(ps.updates[w] > 0 for w in emu.scenario.profiles)
    assert max(ps.updates[w] for w in slow) * 2 < min(ps.updates[w] for w in fast)
    # a sensor's BYE follows its last UPDATE on the same topic, so once every
    # BYE is in the PS has also had every UPDATE (the last may still be on
    # its way when the emulation has ended)
    everyone = sorted((w, "bye") for w in emu.scenario.profiles)
    assert wait_until(lambda: sorted(ps.byes) == everyone), ps.byes
    for wid, r in emu.reports.items():
        assert r.lives == 1 and r.stop_reason == "stopped"
        assert r.clock == ps.updates[wid]  # every computed update applied once


@pytest.mark.integration
def test_crash_fires_the_last_will_and_rejoin_is_a_new_incarnation(  # type: ignore[no-untyped-def]
    mosquitto, ps
) -> None:
    # Prepare
    profiles = {
        "c0": WorkerProfile(compute_time=0.05, crash_at=1.0, rejoin_at=2.0),
        "c1": WorkerProfile(compute_time=0.05),
    }
    emu = Emulation(mosquitto.url, "job1", profiles=profiles).start()
    # Execute
    lost = wait_until(lambda: ("c0", "lost") in ps.byes, timeout=30)
    rejoined = wait_until(lambda: len(ps.instances.get("c0", [])) == 2)
    after = ps.updates["c0"]
    more = wait_until(lambda: ps.updates["c0"] > after + 3)
    ps.finish()  # the job ends: every sensor stops by itself
    ended = emu.join(timeout=30)
    # Assert
    assert lost and rejoined and more and ended
    first, second = ps.instances["c0"]
    assert second != first  # a new process: a new random instance id
    assert emu.reports["c0"].lives == 2
    assert emu.reports["c0"].stop_reason == "done"
    assert emu.reports["c1"].lives == 1
    assert ("c1", "lost") not in ps.byes


@pytest.mark.integration
def test_lossy_links_delay_but_lose_no_update(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    lossy = WorkerProfile(compute_time=0.02, link_delay=0.01, loss_p=0.3)
    emu = Emulation(
        mosquitto.url,
        "job1",
        profiles={"l0": lossy, "l1": lossy},
        max_iterations=25,
        seed=3,
    )
    # Execute
    emu.start()
    ended = emu.join(timeout=60)
    # Assert
    assert ended
    for wid in ("l0", "l1"):
        r = emu.reports[wid]
        assert r.stop_reason == "iterations"
        assert ps.updates[wid] == 25 == r.stats["pushes"]
        assert r.retransmits > 0
    assert ps.duplicates == 0


@pytest.mark.integration
def test_cli_prints_json_and_exits_by_itself(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    cmd = [sys.executable, "-m", "edgeps", "emulate", "--broker", mosquitto.url,
           "--job", "job1", "--workers", "3", "--scenario", "interference",
           "--max-time", "3", "--non-iid", "--json"]  # fmt: skip
    # Execute
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    # Assert
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [w["worker_id"] for w in out["workers"]] == ["w00", "w01", "w02"]
    assert all(w["stats"]["pushes"] > 0 for w in out["workers"])


@pytest.mark.integration
def test_cli_prints_a_table(mosquitto, ps) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    cmd = [sys.executable, "-m", "edgeps", "emulate", "--broker", mosquitto.url,
           "--job", "job1", "--workers", "2", "--max-time", "2"]  # fmt: skip
    # Execute
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    # Assert
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:4] == ["worker", "profile", "lives", "clock"]
    assert [line.split()[0] for line in lines[1:]] == ["w00", "w01"]


@pytest.mark.parametrize(
    "args",
    [["--workers", "0"], ["--workers", "100000"], ["--max-time", "-1"],
     ["--hmac-key-file", "/nonexistent/key"], ["--scenario", "nosuch"]],
)  # fmt: skip
def test_cli_bad_flags_exit_2(args: list[str]) -> None:
    cmd = [sys.executable, "-m", "edgeps", "emulate", "--broker",
           "mqtt://127.0.0.1:9", "--job", "job1", *args]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "error" in proc.stderr.lower()
