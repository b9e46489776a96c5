"""MQTT client-id takeovers cannot be aimed: every connection gets a random suffix.

A broker disconnects a client when another connects with the same client id.
With fixed ids (``edgeps-host-<job>``, the worker id) anyone on the broker
could knock serve or a worker off; a second `edgeps emulate` with the same
worker ids kicked the first one's connections off (issue 9, observation 5).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.transport.host_link import HostLink
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink, fresh_client_id

from tests.e2e.test_faults import finish, start_job, wait_for

pytestmark = pytest.mark.integration


def test_fresh_client_ids_differ_and_keep_the_name() -> None:
    # Execute
    ids = {fresh_client_id("w01") for _ in range(100)}

    # Assert
    assert len(ids) == 100
    assert all(i.startswith("w01-") and len(i) == len("w01-") + 16 for i in ids)


def test_each_connect_uses_a_new_client_id(mosquitto: Any) -> None:
    # Prepare
    link = MqttLink(ConnectionOptions(mosquitto.url), "w07", connect_timeout=5)

    # Execute
    seen = []
    try:
        for _ in range(3):
            link.connect()
            seen.append(link.connection_id)
            link.close()
    finally:
        link.close()

    # Assert
    assert len(set(seen)) == 3
    assert all(cid.startswith("w07-") for cid in seen)


def _intrude(host: str, port: int, client_id: str) -> None:
    """Connect with ``client_id``, wait for the CONNACK, stay 0.1 s, leave."""
    got = threading.Event()
    c = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=client_id, protocol=mqtt.MQTTv311
    )
    c.on_connect = lambda *a: got.set()
    c.connect(host, port)
    c.loop_start()
    try:
        assert got.wait(10), f"no CONNACK for {client_id}"
        threading.Event().wait(0.1)
    finally:
        c.disconnect()
        c.loop_stop()


def test_old_or_guessed_host_client_ids_do_not_knock_serve_off(mosquitto: Any) -> None:
    # Prepare: serve with no workers
    job, host = start_job(mosquitto.url, "idjob", "asp", None)
    coord = job.coordinator
    assert coord is not None
    link = coord.link
    assert isinstance(link, HostLink)
    guesses = ["edgeps-host-idjob"] * 5 + [
        "edgeps-host-idjob-" + g
        for g in ("0" * 16, "f" * 16, "0123456789abcdef", "", "deadbeef")
    ]

    # Execute: ten connections with the old fixed id or a guess at the new one
    try:
        for cid in guesses:
            _intrude(mosquitto.host, mosquitto.port, cid)
        knocked_off = wait_for(lambda: link.disconnects > 0, 1.0)
        up = link.connected
    finally:
        job.stop()
        finish(job, host)

    # Assert
    assert not knocked_off
    assert up
    assert link.connects == 1
    assert link.connection_id.startswith("edgeps-host-idjob-")
    assert link.connection_id not in guesses


def _emulate(url: str, job: str) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "edgeps", "emulate", "--broker", url, "--job", job,
        "--workers", "2", "--max-time", "6", "--json", "--log-level", "error",
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )


def _reconnects(proc: subprocess.Popen[str]) -> dict[str, int]:
    try:
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    report = json.loads(out)
    return {
        w["worker_id"]: int(w["stats"].get("reconnects", 0)) for w in report["workers"]
    }


def test_two_emulators_with_the_same_ids_do_not_kick_each_other_off(
    mosquitto: Any,
) -> None:
    # Prepare: serve, then two emulators with the same worker ids w00, w01
    job, host = start_job(mosquitto.url, "dupjob", "asp", None)

    # Execute
    try:
        first = _emulate(mosquitto.url, "dupjob")
        second = _emulate(mosquitto.url, "dupjob")
        reconnects = [_reconnects(first), _reconnects(second)]
    finally:
        job.stop()
        summary = finish(job, host)

    # Assert: both ran their whole time without a single link loss
    assert [sorted(r) for r in reconnects] == [["w00", "w01"], ["w00", "w01"]]
    assert reconnects == [{"w00": 0, "w01": 0}, {"w00": 0, "w01": 0}]
    assert summary.updates > 0
