"""A broker restart without persistence: serve republishes its retained MODEL.

mosquitto's default keeps retained messages in memory only. Before, serve
published MODEL once, so a worker started after a broker restart waited
forever for the job (issue 9, observation 6).
"""

from __future__ import annotations

import threading
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.transport.host_link import HostLink
from edgeps_worker import wire

from tests.e2e.test_faults import finish, start_job, wait_for

pytestmark = pytest.mark.integration


def _retained_model(host: str, port: int, job: str, timeout: float) -> bytes | None:
    """The retained MODEL a fresh subscriber gets, or None within ``timeout``."""
    got: list[bytes] = []
    heard = threading.Event()

    def on_message(c: Any, u: Any, msg: Any) -> None:
        if msg.retain:
            got.append(bytes(msg.payload))
            heard.set()

    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    c.on_message = on_message
    c.connect(host, port)
    c.loop_start()
    try:
        c.subscribe(wire.topic_model(job), qos=1)
        heard.wait(timeout)
    finally:
        c.disconnect()
        c.loop_stop()
    return got[0] if got else None


def test_worker_started_after_a_broker_restart_joins(mosquitto: Any) -> None:
    # Prepare: serve is up, then the broker is killed and started again empty
    job, host = start_job(mosquitto.url, "brjob", "asp", None)
    coord = job.coordinator
    assert coord is not None
    link = coord.link
    assert isinstance(link, HostLink)
    first_id = link.connection_id
    mosquitto.proc.kill()
    mosquitto.proc.wait(10)
    mosquitto.restart()
    emu = None
    try:
        assert wait_for(lambda: link.connects >= 2 and link.connected, 30)
        wait_for(lambda: coord.model_republished >= 1, 10)
        retained = _retained_model(mosquitto.host, mosquitto.port, "brjob", 10)

        # Execute: a worker that starts only now
        emu = Emulation(mosquitto.url, "brjob", n_workers=1, duration=40.0).start()
        joined = wait_for(
            lambda: (
                coord.server.stats().get("w00") is not None
                and coord.server.stats()["w00"].accepted >= 3
            ),
            30,
        )
    finally:
        if emu is not None:
            emu.stop()
            emu.join(20)
        job.stop()
        summary = finish(job, host)

    # Assert: a fresh client id for the reconnect too; MODEL is back; w00 trains
    assert link.connection_id != first_id
    assert link.connection_id.startswith("edgeps-host-brjob-")
    assert coord.model_republished >= 1
    assert retained is not None
    assert wire.decode(retained).type == wire.MODEL
    assert joined
    assert summary.workers["w00"]["accepted"] >= 3
