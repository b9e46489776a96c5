"""Faults end to end on a real mosquitto: killed and rejoining workers, junk traffic."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.transport.broker import open_broker
from edgeps_worker import wire_host as wire

pytestmark = pytest.mark.integration


class Spy:
    """A plain paho client on the broker: records what it hears, publishes junk."""

    def __init__(self, host: str, port: int, topics: list[str]) -> None:
        self.heard: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311
        )
        self.client.on_message = self._on_message
        self.client.on_subscribe = lambda *a: self.ready.set()
        self.client.connect(host, port)
        self.client.loop_start()
        self.client.subscribe([(t, 1) for t in topics])
        assert self.ready.wait(10)

    def _on_message(self, c: Any, u: Any, msg: Any) -> None:
        with self.lock:
            self.heard.append((msg.topic, bytes(msg.payload)))

    def messages(self) -> list[tuple[str, bytes]]:
        with self.lock:
            return list(self.heard)

    def publish(self, topic: str, payload: bytes) -> None:
        self.client.publish(topic, payload, qos=1).wait_for_publish(10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def wait_for(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def start_job(
    url: str, job_id: str, policy: str, target: float | None, liveness: float = 5.0
) -> tuple[Job, Any]:
    cfg = merge(
        {
            "broker": url,
            "job": job_id,
            "policy": policy,
            "target_accuracy": target,
            "max_time": 90.0,
            "liveness_timeout": liveness,
            "quiet": True,
        }
    )
    job = Job(cfg, broker=open_broker(url))
    result: dict[str, Summary] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    assert job.ready.wait(20) and job.coordinator is not None
    host.result = result  # type: ignore[attr-defined]
    return job, host


def finish(job: Job, host: Any, timeout: float = 90.0) -> Summary:
    host.join(timeout)
    if host.is_alive():
        job.stop()
        host.join(10)
    assert not host.is_alive()
    return host.result["s"]


def start_worker(url: str, job_id: str, wid: str, part: int, n: int) -> Any:
    cmd = [
        sys.executable,
        "-m",
        "edgeps",
        "worker",
        "--broker",
        url,
        "--job",
        job_id,
        "--id",
        wid,
        "--emulated",
        f"sensors:{part}/{n}",
        "--log-level",
        "warning",
    ]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_process(proc: Any) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_killed_worker_does_not_stall_bsp_and_rejoin_is_resynced(
    mosquitto: Any,
) -> None:
    # Prepare: three worker processes under BSP, which waits for every live one
    # liveness timeout far beyond the waits: only the broker's last will frees BSP
    job, host = start_job(mosquitto.url, "kill", "bsp", None, liveness=300.0)
    coord = job.coordinator
    assert coord is not None
    spy = Spy(mosquitto.host, mosquitto.port, [wire.topic_down("kill", "w2")])
    procs = [start_worker(mosquitto.url, "kill", f"w{i}", i, 3) for i in range(3)]
    try:
        # w2 is in: it has been released (sent parameters) a few times
        assert wait_for(lambda: len(spy.messages()) >= 3, 60)

        # Execute: kill one worker the hard way, let the others go on, restart it
        os.kill(procs[2].pid, signal.SIGKILL)
        procs[2].wait(10)
        at_kill = coord.server.version
        assert wait_for(lambda: coord.server.version >= at_kill + 30, 30)
        at_rejoin = coord.server.version
        heard_before = len(spy.messages())
        procs[2] = start_worker(mosquitto.url, "kill", "w2", 2, 3)

        def releases_since_rejoin() -> int:
            # a release is PARAMS (a join, a lone release) or a RELEASE of a
            # shared round; WELCOME and other messages do not count
            kinds = (wire.PARAMS, wire.RELEASE)
            later = spy.messages()[heard_before:]
            return sum(wire.decode(p).type in kinds for _, p in later)

        assert wait_for(lambda: releases_since_rejoin() > 5, 60)
        job.stop()
        summary = finish(job, host)
    finally:
        for p in procs:
            stop_process(p)
        spy.close()

    # Assert: the job went on without w2 and w2's new life got fresh parameters
    assert summary.stop_reason == "interrupted"
    assert summary.version >= at_rejoin >= at_kill + 30
    rejoin = [wire.decode(p) for _, p in spy.messages()[heard_before:]]
    # a release is PARAMS (a join, a lone release) or a RELEASE of a shared round
    versions = [m.version for m in rejoin if m.type in (wire.PARAMS, wire.RELEASE)]
    assert versions and versions[0] >= at_rejoin > 0
    assert len(versions) > 5  # w2 trains on in its new life: released again and again
    snap = coord.server.snapshot(time.monotonic())
    assert snap["workers"]["w2"]["joins"] >= 2


def test_duplicates_and_garbage_from_a_real_client_are_dropped(mosquitto: Any) -> None:
    # Prepare
    job, host = start_job(mosquitto.url, "junk", "ssp:2", 0.85)
    coord = job.coordinator
    assert coord is not None
    spy = Spy(mosquitto.host, mosquitto.port, [wire.topic_up_wildcard("junk")])
    emu = Emulation(mosquitto.url, "junk", n_workers=3, duration=90.0).start()
    try:

        def first_update() -> list[tuple[str, bytes]]:
            out = []
            for topic, payload in spy.messages():
                msg = wire.decode(payload)
                if msg.type == wire.UPDATE and msg.wid == "w00" and msg.seq == 1:
                    out.append((topic, payload))
            return out

        assert wait_for(lambda: coord.server.version >= 20 and first_update(), 60)
        replay = first_update()
        applied_before = coord.applied

        # Execute: replay an old update, then garbage of several kinds
        for topic, payload in replay:
            spy.publish(topic, payload)
        up = wire.topic_up("junk", "w00")
        spy.publish(up, b"garbage")
        spy.publish(up, b"EP" + bytes(60))
        spy.publish(up, bytes(range(256)) * 20)  # no magic: starts with 00 01
        spy.publish(
            wire.topic_up("junk", "nobody"), wire.encode_heartbeat("junk", "w01", 1, 1)
        )
        summary = finish(job, host)
    finally:
        emu.stop()
        emu.join(20)
        spy.close()

    # Assert: all of it counted, none of it applied, training went on
    assert summary.stop_reason == "target_accuracy"
    assert coord.applied > applied_before
    replayed = (
        summary.dropped.get("duplicate_chunk", 0)
        + summary.workers["w00"]["rejected_by_reason"].get("stale_seq", 0)
        + summary.workers["w00"]["rejected_by_reason"].get("duplicate", 0)
    )
    assert replayed >= 1
    assert summary.dropped.get("short", 0) + summary.dropped.get("magic", 0) >= 2
    assert summary.dropped.get("id_mismatch", 0) == 1
    assert summary.version == summary.updates
