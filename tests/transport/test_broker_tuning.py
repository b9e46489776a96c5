"""The auto broker's sizing: pure settings, and a real mosquitto holding a backlog."""

from __future__ import annotations

import getpass
import resource
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from edgeps.cli import main
from edgeps.transport import broker_tuning as tuning
from edgeps.transport.broker import start_mosquitto

from tests.conftest import free_port
from tests.helpers.acl_clients import GeneratedBroker


def test_settings_scale_the_host_backlog_with_the_sensors() -> None:
    small = {s.name: s.value for s in tuning.settings(10)}
    big = {s.name: s.value for s in tuning.settings(5000)}

    assert small["max_queued_messages"] == "10000"  # never below the old bound
    assert big["max_queued_messages"] == "500000"
    assert big["max_queued_bytes"] == str(256 << 20)
    assert int(big["max_inflight_messages"]) >= 1000
    assert all(s.why for s in tuning.settings(5000))
    with pytest.raises(ValueError):
        tuning.settings(0)


def test_conf_lines_put_each_reason_before_its_setting() -> None:
    lines = tuning.mosquitto_lines(2000)

    assert "max_queued_messages 200000" in lines
    i = lines.index("max_queued_messages 200000")
    assert lines[i - 1].startswith("# ") and "dropped" in lines[i - 1]


def test_fd_limit_makes_room_for_every_connection_within_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)

    want_soft, want_hard = tuning.fd_limit(3000)

    assert want_hard == hard
    assert want_soft >= soft
    if hard == resource.RLIM_INFINITY or hard >= 3000 + tuning.SPARE_FDS:
        assert want_soft >= 3000 + tuning.SPARE_FDS
    else:
        assert want_soft == hard


@pytest.mark.integration
def test_auto_mosquitto_keeps_a_backlog_past_the_old_limit_for_a_stalled_host() -> None:
    # Prepare: the host subscribes, then stops reading (a burst it is busy with)
    n = 15000  # above the old max_queued_messages 10000 + inflight 100
    handle = start_mosquitto()  # sized for the default 2000 sensors
    got = [0]
    done = threading.Event()

    def on_message(c: Any, u: Any, msg: Any) -> None:
        got[0] += 1
        if got[0] >= n:
            done.set()

    ready = threading.Event()
    host = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    host.on_message = on_message
    host.on_subscribe = lambda *a: ready.set()
    host.connect(handle.host, handle.port, keepalive=60)
    host.loop_start()
    sensor = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311)
    try:
        host.subscribe("load/up/+", qos=1)
        assert ready.wait(10)
        host.loop_stop()  # not reading: the broker must queue for it
        sensor.max_inflight_messages_set(1000)
        sensor.connect(handle.host, handle.port)
        sensor.loop_start()
        infos = [sensor.publish("load/up/s0", b"x" * 64, qos=1) for _ in range(n)]
        deadline = time.monotonic() + 60
        while not all(i.is_published() for i in infos):
            assert time.monotonic() < deadline, "the broker did not take the burst"
            time.sleep(0.05)

        # Execute: the host reads again
        host.loop_start()
        done.wait(60)
    finally:
        sensor.disconnect()
        sensor.loop_stop()
        host.disconnect()
        host.loop_stop()
        handle.close()

    # Assert: nothing was dropped for the host
    assert got[0] == n


@pytest.mark.integration
def test_broker_config_sized_for_sensors_starts_a_real_mosquitto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare
    port = free_port()
    out = tmp_path / "broker"
    argv = ["broker-config", "--job", "j", "--workers", "w00,w01", "--out", str(out),
            "--listen", f"127.0.0.1:{port}", "--run-as", getpass.getuser(),
            "--hasher", "builtin", "--sensors", "3000"]  # fmt: skip

    # Execute
    assert main(argv) == 0
    printed = capsys.readouterr().out
    lines = (out / "mosquitto.conf").read_text().splitlines()
    broker = GeneratedBroker(out / "mosquitto.conf", port, tmp_path / "mosquitto.log")
    broker.start()  # RuntimeError if mosquitto refuses the config
    try:
        alive = broker.proc is not None and broker.proc.poll() is None
    finally:
        broker.stop()

    # Assert: sized settings in, its own persistence kept, the fd advice given
    assert "max_queued_messages 300000" in lines
    assert "max_inflight_messages 1000" in lines
    assert "persistence true" in lines and "persistence false" not in lines
    assert f"{3000 + tuning.SPARE_FDS} open files" in printed
    assert alive
