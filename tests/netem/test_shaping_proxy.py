"""The shaping relay through a real mosquitto: a slow link takes its bytes' time."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from edgeps.netem.shaper import ShapingProxy
from edgeps.netem.shaping import LinkShape
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink

RATE = 250e3  # bits/s
N = 32 * 1024  # payload bytes: ~1.05 s at 250 kbit/s


@pytest.fixture
def relay(mosquitto) -> Iterator[ShapingProxy]:  # type: ignore[no-untyped-def]
    r = ShapingProxy("127.0.0.1", mosquitto.port, seed=1).start()
    try:
        yield r
    finally:
        r.close()


def _link(url: str, cid: str) -> MqttLink:
    link = MqttLink(ConnectionOptions(url), cid, publish_timeout=30.0)
    link.connect()
    return link


def _transfer(sender: MqttLink, receiver: MqttLink, topic: str) -> float:
    """Seconds from publishing N bytes to receiving them (bounded wait)."""
    receiver.subscribe(topic, qos=1)
    payload = bytes(range(256)) * (N // 256)
    t0 = time.monotonic()
    sender.publish(topic, payload, qos=1)
    deadline = t0 + 30
    while time.monotonic() < deadline:
        got = receiver.poll(200)
        if got is not None:
            assert got == (topic, payload)
            return time.monotonic() - t0
    raise AssertionError(f"no message on {topic} within 30 s")


@pytest.mark.integration
@pytest.mark.parametrize("direction", ["up", "down"])
def test_a_shaped_link_takes_at_least_bytes_over_rate(  # type: ignore[no-untyped-def]
    mosquitto, relay, direction
) -> None:
    # Prepare: one sensor behind the relay, one plain client on the broker
    shaped = LinkShape(rate=RATE, delay=0.02) if direction == "up" else LinkShape()
    back = LinkShape(rate=RATE, delay=0.02) if direction == "down" else LinkShape()
    port = relay.add("s1", up=shaped, down=back)
    sensor = _link(f"mqtt://127.0.0.1:{port}", "sensor")
    plain = _link(mosquitto.url, "plain")
    try:
        # Execute: the same payload over the shaped and an unshaped path
        if direction == "up":
            slow = _transfer(sensor, plain, "t/slow")
            fast = _transfer(plain, plain, "t/fast")
        else:
            slow = _transfer(plain, sensor, "t/slow")
            fast = _transfer(plain, plain, "t/fast")
        stats = relay.stats("s1")
    finally:
        sensor.close()
        plain.close()
    # Assert: the physical bound N*8/rate holds, and the shaping is what costs
    bound = N * 8 / RATE
    assert slow >= 0.8 * bound
    assert slow > 3 * fast
    moved = stats["bytes_up"] if direction == "up" else stats["bytes_down"]
    assert moved >= N
    assert stats["connections"] == 1


@pytest.mark.integration
def test_loss_delays_but_never_corrupts(mosquitto, relay) -> None:  # type: ignore[no-untyped-def]
    # Prepare: a lossy link both ways
    lossy = LinkShape(rate=2e6, delay=0.005, loss=0.2)
    port = relay.add("s2", up=lossy, down=lossy)
    sensor = _link(f"mqtt://127.0.0.1:{port}", "lossy")
    plain = _link(mosquitto.url, "plain2")
    try:
        # Execute
        _transfer(sensor, plain, "t/up")
        _transfer(plain, sensor, "t/down")  # the payload is compared inside
        stats = relay.stats("s2")
    finally:
        sensor.close()
        plain.close()
    # Assert: segments were lost, and paid for in time, not in bytes
    assert stats["lost_segments_up"] + stats["lost_segments_down"] > 0
    assert stats["bytes_up"] >= N and stats["bytes_down"] >= N


@pytest.mark.integration
def test_a_cut_sensor_fires_its_last_will(mosquitto, relay) -> None:  # type: ignore[no-untyped-def]
    port = relay.add("s3", up=LinkShape(delay=0.01), down=LinkShape(delay=0.01))
    plain = _link(mosquitto.url, "watcher")
    plain.subscribe("t/will", qos=1)
    sensor = MqttLink(ConnectionOptions(f"mqtt://127.0.0.1:{port}"), "mortal")
    sensor.connect("t/will", b"gone")
    try:
        sensor.abort()
        deadline = time.monotonic() + 10
        got = None
        while got is None and time.monotonic() < deadline:
            got = plain.poll(200)
    finally:
        plain.close()
    assert got == ("t/will", b"gone")


@pytest.mark.integration
def test_bench_links_reports_the_bound_each_way() -> None:
    # Prepare
    cmd = [sys.executable, "-m", "edgeps", "bench", "links", "--bytes", "8192",
           "--repeat", "1", "--link-rate", "250kbit", "--json"]  # fmt: skip
    # Execute
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    # Assert
    assert proc.returncode == 0, proc.stderr
    rows = {r["direction"]: r for r in json.loads(proc.stdout)["rows"]}
    assert rows["up"]["bound_s"] == pytest.approx(8192 * 8 / 250e3, abs=1e-3)
    assert rows["up"]["ratio"] >= 0.8 and rows["down"]["ratio"] >= 0.8
    assert rows["unshaped"]["median_s"] < rows["up"]["median_s"]
