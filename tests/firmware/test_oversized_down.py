"""Oversized messages on the board's down topic under MicroPython against a
real mosquitto: read off the socket and dropped, the session kept."""

from __future__ import annotations

import numpy as np
import paho.mqtt.client as mqtt
import pytest
from edgeps.kernels import ModelSpec
from edgeps_worker import datafile
from edgeps_worker import wire_host as wire
from paho.mqtt.enums import CallbackAPIVersion

from tests.helpers.fw_host import (
    MiniPS,
    finish_worker,
    start_worker,
    write_worker_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.firmware]
SPEC = "mlp:8-6-3"


def test_oversized_messages_are_dropped_and_the_board_keeps_its_session(
    micropython, mosquitto, tmp_path
):
    # Prepare: 1 KB chunks; 8 KB from the PS before the first release, then,
    # while the PS holds the third release, 20 KB (QoS 1) and 3 KB (QoS 0)
    # from another client on the same broker
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 8)).astype(np.float32)
    datafile.write_file(str(tmp_path / "data.bin"), X.tolist(), [0, 1, 2, 1] * 10)
    cfg = write_worker_config(tmp_path, mosquitto.port, max_iterations=4)
    ps = MiniPS(mosquitto.port, "fwjob", SPEC, ModelSpec.parse(SPEC).init_params(8))
    ps.inject = [bytes(8192)]
    ps.hold_after = 2
    other = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="someone-else")
    ps.start()
    try:
        # Execute
        proc = start_worker(micropython, cfg, limit_ms=60000)
        held = ps.wait_for(lambda p: len(p.updates) >= 2, timeout=30)
        other.connect("127.0.0.1", mosquitto.port)
        other.loop_start()
        down = wire.topic_down("fwjob", "mpy-1")
        other.publish(down, b"\x01" * 20000, qos=1).wait_for_publish(10)
        other.publish(down, b"\x02" * 3000, qos=0).wait_for_publish(10)
        ps.hold_after = None  # the board's re-HELLO gets the next release
        report, out = finish_worker(proc, timeout=90)
    finally:
        other.loop_stop()
        other.disconnect()
        ps.stop()
    # Assert: every oversized message counted and logged, no reconnect
    assert held, out
    assert report["reason"] == "iterations", out
    assert report["rejects"].get("oversized") == 3, out
    assert report["stats"]["bad_messages"] >= 3
    assert report["stats"]["reconnects"] == 0, out
    assert out.count("oversized on " + down) == 3
    assert sorted({u.seq for u in ps.updates}) == [1, 2, 3, 4]
    assert len({u.session for u in ps.updates}) == 1
