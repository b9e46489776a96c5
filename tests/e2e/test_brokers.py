"""One job end to end on three broker implementations, and through losing a node.

edgeps relies on standard MQTT 3.1.1 only (QoS 1, retained messages, last
wills, clean sessions, client ids longer than 23 characters, messages up to
one chunk). Here the same job reaches its target on mosquitto, on the
embedded amqtt and on aedes, and on a two-node aedes cluster sharing its state
through redis it survives losing the node the host and half the sensors use.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.transport import broker as brokers
from edgeps.transport.broker import open_broker
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink
from edgeps.workloads.scenarios import make_scenario
from edgeps_worker import wire

from tests.conftest import start_mosquitto
from tests.helpers.aedes_cluster import Cluster, start_cluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TARGET = 0.8
CLUSTER_TARGET = 0.85
KINDS = ("mosquitto", "amqtt", "aedes")


@pytest.fixture(params=KINDS)
def broker_url(request: Any, tmp_path: Path) -> Iterator[str]:
    """The URL of a real broker of each kind, stopped by pid afterwards."""
    kind = request.param
    if kind == "mosquitto":
        m = start_mosquitto(tmp_path)
        try:
            yield m.url
        finally:
            m.stop()
    elif kind == "amqtt":
        if not brokers.amqtt_available():
            pytest.skip("amqtt (the demo extra) is not installed")
        handle = open_broker("amqtt")
        try:
            yield handle.url
        finally:
            handle.close()
    else:
        cluster = start_cluster(tmp_path, n_nodes=1)
        try:
            yield cluster.url()
        finally:
            cluster.stop()


def wait_for(cond: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.02)
    return False


def start_job(
    url: str, job_id: str, target: float | None = TARGET
) -> tuple[Job, threading.Thread, dict[str, Any]]:
    cfg = merge(
        {
            "broker": url,
            "job": job_id,
            "policy": "asp",
            "target_accuracy": target,
            "max_time": 90.0,
            "liveness_timeout": 5.0,
            "quiet": True,
            "seed": 1,
        }
    )
    job = Job(cfg, broker=open_broker(url))
    result: dict[str, Any] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    assert job.ready.wait(20) and job.coordinator is not None
    return job, host, result


def sensors(url: str, job_id: str, ids: list[str], **kw: Any) -> Emulation:
    profiles = make_scenario("homogeneous", 4, seed=1).profiles
    chosen = {wid: profiles[wid] for wid in ids}
    return Emulation(url, job_id, profiles=chosen, seed=1, duration=90.0, **kw)


def finish(job: Job, host: threading.Thread, emus: list[Emulation]) -> None:
    host.join(90)
    job.stop()
    host.join(10)
    for emu in emus:
        emu.stop()
    for emu in emus:
        emu.join(20)
    assert not host.is_alive()


def test_a_job_reaches_its_target_on_each_broker(broker_url: str) -> None:
    # Prepare
    job, host, result = start_job(broker_url, "jb")
    emu = sensors(broker_url, "jb", ["w00", "w01", "w02"]).start()

    # Execute
    finish(job, host, [emu])
    summary: Summary = result["s"]

    # Assert
    assert summary.stop_reason == "target_accuracy"
    assert summary.accuracy is not None and summary.accuracy >= TARGET
    assert set(summary.workers) == {"w00", "w01", "w02"}
    assert all(w["accepted"] > 0 for w in summary.workers.values())
    assert summary.dropped == {}


def _listen(url: str, topic: str, heard: list[Any], ready: threading.Event) -> Any:
    node = ConnectionOptions(url).address
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    c.on_message = lambda cl, u, msg: heard.append(
        (msg.topic, bytes(msg.payload), msg.retain)
    )
    c.on_subscribe = lambda *a: ready.set()
    c.connect(node.host, node.port)
    c.loop_start()
    c.subscribe(topic, qos=1)
    return c


def test_the_mqtt_features_edgeps_uses_work_on_each_broker(broker_url: str) -> None:
    # Prepare: a link with the longest client id edgeps makes, the host's for
    # a 32-character job id plus the random suffix: 61 characters
    wid = "w" * 32
    name = "edgeps-host-" + "j" * 32
    link = MqttLink(ConnectionOptions(broker_url), name, connect_timeout=10.0)
    heard: list[Any] = []
    ready = threading.Event()
    spy = None
    try:
        link.connect("edgeps/jf/up/" + wid, b"will")
        link.publish("edgeps/jf/model", b"model-v1", retain=True)

        # Execute: a late subscriber, then the sensor's link breaks
        spy = _listen(broker_url, "edgeps/jf/#", heard, ready)
        assert ready.wait(10)
        wait_for(lambda: len(heard) >= 1, 10)
        link.abort()
        wait_for(lambda: len(heard) >= 2, 15)
    finally:
        link.close()
        if spy is not None:
            spy.disconnect()
            spy.loop_stop()

    # Assert: retained MODEL for the late subscriber, the will on the break
    assert len(link.connection_id) == 61
    assert ("edgeps/jf/model", b"model-v1", True) in heard
    assert ("edgeps/jf/up/" + wid, b"will", False) in heard


def test_messages_up_to_a_chunk_pass_each_broker(broker_url: str) -> None:
    big = bytes(range(256)) * (wire.MAX_MESSAGE // 256 // 4)  # 256 KB
    link = MqttLink(ConnectionOptions(broker_url), "wbig", connect_timeout=10.0)
    try:
        link.connect()
        link.subscribe("edgeps/jbig/down/wbig")
        link.publish("edgeps/jbig/down/wbig", big)
        got = link.poll(10000)
    finally:
        link.close()

    assert got == ("edgeps/jbig/down/wbig", big)


def test_a_job_survives_losing_a_node_of_an_aedes_cluster(tmp_path: Path) -> None:
    # Prepare: serve and w00, w01 use node A first, w02, w03 node B first
    cluster: Cluster = start_cluster(tmp_path, n_nodes=2)
    a = cluster.nodes[0]
    emus: list[Emulation] = []
    try:
        job, host, result = start_job(cluster.url(0, 1), "jc", None)
        coord = job.coordinator
        assert coord is not None
        # a push or release in flight while the host fails over is lost (clean
        # sessions): the sensor's release timeout re-HELLOs, so keep it short
        fast = {"release_timeout_ms": 3000}
        emus.append(sensors(cluster.url(0, 1), "jc", ["w00", "w01"], **fast).start())
        emus.append(sensors(cluster.url(1, 0), "jc", ["w02", "w03"], **fast).start())
        both_pushed = wait_for(
            lambda: all(
                (s := coord.server.stats().get(w)) is not None and s.accepted >= 1
                for w in ("w00", "w02")
            ),
            30,
        )
        version_at_kill = coord.server.version
        stats = coord.server.stats()
        on_a_at_kill = stats["w00"].accepted + stats["w01"].accepted

        # Execute: node A dies (SIGKILL by pid) mid-job; the job runs (no
        # target, so it cannot end before A's sensors are back) until those
        # sensors have pushed through B and the model reached the target
        a.kill()

        def recovered() -> bool:
            s = coord.server.stats()
            on_a = s["w00"].accepted + s["w01"].accepted
            acc = coord.accuracy
            return on_a > on_a_at_kill and acc is not None and acc >= CLUSTER_TARGET

        came_back = wait_for(recovered, 60)
        job.stop()
        finish(job, host, emus)
    finally:
        cluster.stop()
    summary: Summary = result["s"]

    # Assert: the host moved to node B, the sensors that were on A failed over
    # to B and went on pushing, and the job still reached the target
    assert both_pushed
    assert came_back
    assert summary.accuracy is not None and summary.accuracy >= CLUSTER_TARGET
    assert summary.version > version_at_kill
    link = coord.link
    assert isinstance(link, MqttLink)
    assert link.address.port == cluster.nodes[1].port
    assert link.connects >= 2
    on_a = summary.workers["w00"]["accepted"] + summary.workers["w01"]["accepted"]
    assert on_a > on_a_at_kill
