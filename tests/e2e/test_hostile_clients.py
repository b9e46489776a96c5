"""Protocol v2 against a real mosquitto: issue 9's observations as regressions.

Each test runs `edgeps serve` (the in-process Job) and emulated sensors on a
fresh broker; a small raw paho client plays the hostile one (it may read any
topic: the broker has no ACLs here).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.pyworker.localdata import load_emulated
from edgeps.pyworker.trainer import NativeTrainer
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.security.keys import derive_worker_key
from edgeps.transport.broker import open_broker
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink
from edgeps_worker import wire_host as wire
from edgeps_worker.worker import Worker

pytestmark = pytest.mark.integration
JOB = "v2"
MASTER = b"master key of the v2 tests"


def wait_until(cond: Callable[[], bool], timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


class Intruder:
    """A raw paho client: sniffs the down topics, publishes whatever it likes."""

    def __init__(self, broker: Any) -> None:
        self.seen: list[wire.Message] = []
        self.raw: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311
        )
        self.client.on_message = self._on_message
        self.client.connect(broker.host, broker.port)
        self.client.subscribe(f"edgeps/{JOB}/#", qos=1)
        self.client.loop_start()

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        with self.lock:
            self.raw.append((message.topic, bytes(message.payload)))
            with contextlib.suppress(wire.WireError):
                self.seen.append(wire.decode(message.payload))

    def last(self, mtype: int, wid: str) -> wire.Message | None:
        with self.lock:
            found = [m for m in self.seen if m.type == mtype and m.wid == wid]
        return found[-1] if found else None

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


class Run:
    """serve + emulated sensors + an intruder on one broker, all cleaned up."""

    def __init__(self, broker: Any, policy: str, n: int, **emu: Any) -> None:
        flags: dict[str, Any] = {
            "broker": broker.url, "job": JOB, "policy": policy, "max_time": 60.0,
            "quiet": True, "liveness_timeout": 4.0,
        }  # fmt: skip
        key = emu.pop("key_file", None)
        if key is not None:
            flags["hmac_key_file"] = key
        self.job = Job(merge(flags), broker=open_broker(broker.url))
        self.result: dict[str, Summary] = {}
        self.host = threading.Thread(
            target=lambda: self.result.update(s=self.job.run())
        )
        self.host.start()
        assert self.job.ready.wait(20)
        self.intruder = Intruder(broker)
        self.emu = Emulation(broker.url, JOB, n_workers=n, duration=90.0, **emu).start()

    @property
    def coord(self) -> Any:
        return self.job.coordinator

    def accepted(self, wid: str) -> int:
        stats = self.coord.server.stats().get(wid)
        return 0 if stats is None else stats.accepted

    def finish(self) -> Summary:
        self.job.stop()
        self.host.join(20)
        self.emu.stop()
        self.emu.join(20)
        self.intruder.close()
        return self.result["s"]


@pytest.fixture
def run_factory(mosquitto: Any):  # type: ignore[no-untyped-def]
    runs: list[Run] = []

    def make(policy: str, n: int = 3, **emu: Any) -> Run:
        run = Run(mosquitto, policy, n, **emu)
        runs.append(run)
        return run

    yield make
    for run in runs:
        if run.host.is_alive():
            run.finish()


def test_obs1_a_poisoned_seq_and_a_nan_do_not_freeze_bsp(run_factory) -> None:  # type: ignore[no-untyped-def]
    # Prepare: BSP with 3 sensors; the intruder sniffed w01's session
    run = run_factory("bsp")
    assert wait_until(lambda: run.accepted("w01") >= 3)
    session = run.coord.peers.get("w01").session
    n = run.coord.server.n_params
    nan = np.full(n, np.nan, "<f4").tobytes()
    up = wire.topic_up(JOB, "w01")

    # Execute: seq 2^32-1 with NaN, then a NaN at the next seq, in w01's session
    for seq in (2**32 - 1, run.coord.server.stats()["w01"].accepted + 1):
        for chunk in wire.encode_update(JOB, "w01", session, seq, 10**6, 0, 0.0, 1,
                                        0.0, nan, max_chunk=1 << 16):  # fmt: skip
            run.intruder.publish(up, chunk)
    before = {w: run.accepted(w) for w in ("w00", "w01", "w02")}
    went_on = wait_until(lambda: all(run.accepted(w) >= before[w] + 5 for w in before))
    summary = run.finish()

    # Assert: nothing recorded the poisoned seq; w01 and the barrier went on
    assert went_on, before
    rejected = summary.workers["w01"]["rejected_by_reason"]
    assert rejected.get("bad_seq", 0) >= 1
    assert rejected.get("stale_seq", 0) == 0


def test_obs3_forged_done_and_an_old_lives_last_will_stop_nobody(
    run_factory, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    # Prepare: per-device keys; c0 crashes once (its last will fires) and rejoins
    from edgeps.workloads.scenarios import WorkerProfile

    key_file = tmp_path / "master.key"
    key_file.write_bytes(MASTER)
    profiles = {
        "c0": WorkerProfile(compute_time=0.02, crash_at=1.0, rejoin_at=1.5),
        "c1": WorkerProfile(compute_time=0.02),
    }
    run = run_factory("ssp:2", key_file=str(key_file), hmac_key=MASTER,
                      profiles=profiles)  # fmt: skip
    assert wait_until(lambda: run.intruder.last(wire.BYE, "c0") is not None)
    assert wait_until(lambda: run.emu.reports["c0"].lives == 2)
    first_life = run.accepted("c0")
    assert wait_until(lambda: run.accepted("c0") >= first_life + 3)
    will = [p for t, p in run.intruder.raw if t == wire.topic_up(JOB, "c0")
            and wire.decode(p).type == wire.BYE][-1]  # fmt: skip

    # Execute: replay the old life's signed will; retain a forged MODEL done;
    # send each a STOP done signed with a guessed key and one with c1's key as c0
    run.intruder.publish(wire.topic_up(JOB, "c0"), will)
    done = wire.encode_model(JOB, run.coord.run_id, "done", "", 0, 0)
    run.intruder.publish(wire.topic_model(JOB), done, retain=True)
    c0 = run.coord.peers.get("c0")
    for key in (b"guess", derive_worker_key(MASTER, "c1")):
        stop = wire.encode_stop(JOB, "c0", run.coord.run_id, c0.session, "done", key)
        run.intruder.publish(wire.topic_down(JOB, "c0"), stop)
    before = {w: run.accepted(w) for w in ("c0", "c1")}
    went_on = wait_until(lambda: all(run.accepted(w) >= before[w] + 5 for w in before))
    summary = run.finish()

    # Assert: both kept training in their sessions; the will was ignored
    assert went_on, (before, {w: r.stop_reason for w, r in run.emu.reports.items()})
    assert summary.workers["c0"]["state"] == "live" or summary.stop_reason
    assert summary.workers["c0"]["rejected_by_reason"].get("stale_session", 0) >= 1
    assert run.emu.reports["c1"].stop_reason in ("stopped", "done", "")


def test_obs4_a_forged_hello_cannot_push_out_or_saturate_a_live_worker(
    run_factory,
) -> None:  # type: ignore[no-untyped-def]
    # Prepare: no keys; w01 trains
    run = run_factory("dsp", n=2)
    assert wait_until(lambda: run.accepted("w01") >= 3)
    up = wire.topic_up(JOB, "w01")

    # Execute: HELLOs for w01 from made-up processes, one with the largest ids
    for instance in (1, 2**64 - 1, 12345):
        run.intruder.publish(up, wire.encode_hello(JOB, "w01", instance, instance))
    assert wait_until(lambda: run.intruder.last(wire.STOP, "w01") is not None)
    before = run.accepted("w01")
    went_on = wait_until(lambda: run.accepted("w01") >= before + 5)
    summary = run.finish()

    # Assert: each was refused to its own nonce; w01's session never changed
    stops = [m for m in run.intruder.seen if m.type == wire.STOP and m.wid == "w01"]
    assert {(m.session, m.reason) for m in stops} >= {
        (1, "duplicate_id"), (2**64 - 1, "duplicate_id"), (12345, "duplicate_id")
    }  # fmt: skip
    assert went_on
    assert summary.workers["w01"]["rejected_by_reason"]["duplicate_id"] == 3


def test_obs5_a_second_process_with_the_same_id_is_refused_and_exits(
    run_factory, mosquitto
) -> None:  # type: ignore[no-untyped-def]
    # Prepare: w00 trains in the emulation; another process takes the same id
    run = run_factory("asp", n=2)
    assert wait_until(lambda: run.accepted("w00") >= 3)
    data, spec = load_emulated("sensors:0/4", 0)
    other = Worker(
        MqttLink(ConnectionOptions(mosquitto.url), "second-process-w00"),
        NativeTrainer(run.job.model.spec, data, batch=8, seed=1),
        JOB, "w00", release_timeout_ms=500, poll_ms=50,
    )  # fmt: skip

    # Execute
    reason = other.run()
    before = run.accepted("w00")
    went_on = wait_until(lambda: run.accepted("w00") >= before + 5)
    summary = run.finish()

    # Assert: refused three times, it gave up; its updates never counted
    assert reason == "duplicate_id" and other.stats["pushes"] == 0
    assert went_on
    assert summary.workers["w00"]["rejected_by_reason"]["duplicate_id"] == 3


def test_obs7_a_reconnect_says_hello_first_and_wastes_no_update(
    run_factory, mosquitto
) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    run = run_factory("bsp", n=3)
    assert wait_until(lambda: all(run.accepted(w) >= 3 for w in ("w00", "w01")))

    # Execute: every link is cut (the broker restarts), twice
    for _ in range(2):
        mosquitto.restart()
        time.sleep(1.0)
    before = {w: run.accepted(w) for w in ("w00", "w01", "w02")}
    went_on = wait_until(lambda: all(run.accepted(w) >= before[w] + 3 for w in before))
    summary = run.finish()

    # Assert: no update was sent into a dead session or without a release
    assert went_on, before
    for wid in ("w00", "w01", "w02"):
        rejected = summary.workers[wid]["rejected_by_reason"]
        assert rejected.get("dead_worker", 0) == 0, (wid, rejected)
        assert rejected.get("not_released", 0) == 0, (wid, rejected)
    assert sum(r.stats.get("reconnects", 0) for r in run.emu.reports.values()) >= 3
