"""A HELLO captured in an earlier run, replayed into a new one, holds no id.

Observed before: replayed every 2 s into a new run (per-device keys, no
ACLs), it kept the id joining and recently heard, and the real worker's new
process was refused as ``duplicate_id`` (exit 2). A HELLO carries no proof of
freshness: only a heartbeat or push in the session the host issued does.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from edgeps.core import ParameterServer
from edgeps.core.admission import Admission
from edgeps.core.types import Heartbeat, Join, Push, Rejected, Release, Tick
from edgeps.policy.bsp import BSP
from edgeps.pyworker.localdata import load_emulated
from edgeps.pyworker.trainer import NativeTrainer
from edgeps.security.keys import derive_worker_key
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink
from edgeps_worker import wire_host as wire
from edgeps_worker.worker import Worker

from tests.e2e.test_hostile_clients import JOB, MASTER, Run, wait_until
from tests.redteam._held import held

TIMEOUT = 10.0
REPLAYED = dict(instance=0xA1, nonce=0x51)  # the earlier run's process and link


def new_run() -> ParameterServer:
    return ParameterServer(
        np.zeros(3, np.float32),
        policy=BSP(),
        liveness_timeout=TIMEOUT,
        admission=Admission(on_first_push=True),
    )


def replay(ps: ParameterServer, now: float) -> list[object]:
    """The captured HELLO again (the host gives each HELLO a fresh session)."""
    return ps.handle(Join("pi-1", int(now * 1000) + 7, **REPLAYED), now)


def test_a_replayed_hello_does_not_block_the_real_workers_new_process() -> None:
    # Prepare: a new run, the replay already flowing
    ps = new_run()
    replay(ps, 0.0)
    # Execute: the real worker's new process says hello, pushes, and the replay goes on
    answer = ps.handle(Join("pi-1", 900, instance=0xB2, nonce=0x77), 1.0)
    push = Push("pi-1", 1, 0, 0, np.zeros(3, np.float32), 0.01, 1, 900)
    ps.handle(push, 1.5)
    later = [replay(ps, t) for t in (2.0, 4.0, 6.0)]
    ps.handle(Heartbeat("pi-1", 1, session=900), 6.5)
    # Assert: the real one is welcomed and keeps its session; the replay is refused
    welcomed = any(isinstance(a, Release) for a in answer)
    refused = all(a == [Rejected("pi-1", 0, "duplicate_id")] for a in later)
    stats = ps.stats()["pi-1"]
    held(
        welcomed and refused and stats.accepted == 1,
        "a HELLO from an earlier run does not lock out the real worker",
        (answer, later, stats),
    )


def test_a_replayed_hello_does_not_keep_an_id_alive() -> None:
    # Prepare: a new run; nobody but the replayer speaks for pi-1
    ps = new_run()
    # Execute: the captured HELLO every 2 s for longer than the liveness timeout
    for i in range(8):
        replay(ps, 2.0 * i)
    ps.handle(Tick(), 2.0 * 7 + 0.5)
    # Assert: the id was forgotten a timeout after its first hello, replays or not
    held(
        ps.forgotten_total >= 1 and ps.worker_state("pi-1") is None,
        "a replayed HELLO refreshes no liveness",
        (ps.forgotten_total, ps.worker_state("pi-1")),
    )


def test_a_joining_worker_that_heartbeats_keeps_its_id() -> None:
    # Prepare: the real worker joined and proves its session by heartbeats
    ps = new_run()
    ps.handle(Join("pi-1", 900, instance=0xB2, nonce=0x77), 0.0)
    for t in (4.0, 8.0, 12.0):
        ps.handle(Heartbeat("pi-1", 0, session=900), t)
    # Execute: the earlier run's HELLO arrives, then a liveness pass
    refused = replay(ps, 13.0)
    ps.handle(Tick(), 14.0)
    # Assert: the holder stays; the replay is refused
    assert refused == [Rejected("pi-1", 0, "duplicate_id")]
    assert ps.worker_state("pi-1") is not None


@pytest.mark.integration
@pytest.mark.slow
def test_a_worker_trains_while_its_earlier_runs_hello_is_replayed(
    mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: a keyed job (2 emulated sensors), and pi-1's HELLO as a sniffer
    # kept it from an earlier run: signed with pi-1's key, another process's
    key_file = tmp_path / "master.key"
    key_file.write_bytes(MASTER)
    key_file.chmod(0o600)
    run = Run(mosquitto, "asp", 2, key_file=str(key_file), hmac_key=MASTER)
    key = derive_worker_key(MASTER, "pi-1")
    captured = bytes(wire.encode_hello(JOB, "pi-1", 0xA1, 0x51, key=key))
    stop = threading.Event()
    replayed = [0]

    def replay() -> None:
        client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
        client.connect(mosquitto.host, mosquitto.port)
        client.loop_start()
        while not stop.is_set():
            client.publish(wire.topic_up(JOB, "pi-1"), captured, 1)
            replayed[0] += 1
            stop.wait(0.5)
        client.loop_stop()
        client.disconnect()

    replayer = threading.Thread(target=replay)
    replayer.start()
    try:
        assert wait_until(lambda: replayed[0] >= 3)
        data, _ = load_emulated("sensors:1/4", 0)
        worker = Worker(
            MqttLink(ConnectionOptions(mosquitto.url), "pi-1-new-process"),
            NativeTrainer(run.job.model.spec, data, batch=8, seed=1),
            JOB, "pi-1", key=key, max_iterations=20, release_timeout_ms=500,
            poll_ms=50,
        )  # fmt: skip
        # Execute: the real worker's new process, while the replay goes on
        reason = worker.run()
        before = replayed[0]
        assert wait_until(lambda: replayed[0] >= before + 3)
    finally:
        stop.set()
        replayer.join(10)
        summary = run.finish()
    # Assert: it trained; the replays were refused, not it
    row = summary.workers["pi-1"]
    held(
        reason == "iterations" and row["accepted"] >= 20,
        "the real worker is not locked out by an earlier run's HELLO",
        (reason, worker.stats, row),
    )
    refused = row["rejected_by_reason"].get("duplicate_id", 0)
    held(
        refused + row["dropped_by_reason"].get("replay", 0) >= 3,
        "the replayed HELLO is refused or dropped once the worker holds the id",
        row,
    )
