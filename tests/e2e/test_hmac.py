"""End to end with an HMAC key: signed workers train, unsigned traffic is dropped."""

from __future__ import annotations

import threading
from pathlib import Path
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


def test_signed_job_trains_and_unsigned_messages_are_dropped(
    mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare
    key_file = tmp_path / "job.key"
    key_file.write_text("correct horse battery staple\n")
    cfg = merge(
        {
            "broker": mosquitto.url,
            "job": "signed",
            "policy": "ssp:2",
            "target_accuracy": 0.8,
            "max_time": 60.0,
            "quiet": True,
            "hmac_key_file": str(key_file),
        }
    )
    job = Job(cfg, broker=open_broker(mosquitto.url))
    result: dict[str, Summary] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    assert job.ready.wait(20)
    intruder = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    intruder.connect(mosquitto.host, mosquitto.port)
    intruder.loop_start()
    emu = Emulation(
        mosquitto.url,
        "signed",
        n_workers=3,
        duration=90.0,
        hmac_key=b"correct horse battery staple",
    ).start()
    try:
        # Execute: an unsigned hello, an update signed with a wrong key, and
        # w01's own key used to sign as w00 (per-device keys: it cannot)
        from edgeps.security.keys import derive_worker_key

        w01_key = derive_worker_key(b"correct horse battery staple", "w01")
        up = wire.topic_up("signed", "w00")
        intruder.publish(up, wire.encode_hello("signed", "w00", 77, 77), qos=1)
        hello_as_w00 = wire.encode_hello("signed", "w00", 78, 78, key=w01_key)
        intruder.publish(up, hello_as_w00, qos=1)
        grad = bytes(4 * job.model.spec.n_params)
        for chunk in wire.encode_update(
            "signed", "w00", 77, 1, 1, 0, 0.0, 1, 0.0, grad, key=b"guess"
        ):
            intruder.publish(up, chunk, qos=1).wait_for_publish(10)
        host.join(90)
    finally:
        job.stop()
        host.join(10)
        emu.stop()
        emu.join(20)
        intruder.disconnect()
        intruder.loop_stop()

    # Assert
    summary = result["s"]
    assert summary.stop_reason == "target_accuracy"
    assert summary.dropped.get("hmac", 0) >= 3
    assert summary.version == summary.updates > 0
