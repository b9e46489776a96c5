"""UPDATE chunks framed in place (MQTTClient.publish_frame + wire.chunk_frame):
the same bytes on the wire as publishing each encoded chunk, resends included."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest
from edgeps_worker import mqtt_packets as mp
from edgeps_worker import wire, wire_host
from edgeps_worker.mqtt import MQTTClient

from tests.conftest import run_micropython
from tests.firmware.test_mqtt_fake_link import FakeBrokerLink

SCRIPT = str(Path(__file__).parents[1] / "helpers" / "mpy" / "fw_update_frames.py")
N = 2410  # mlp:64-32-10


def grad(n: int) -> array:
    return array("f", [(i % 97) / 8.0 - 6.0 for i in range(n)])


def expected(n: int, key: bytes | None) -> list[bytes]:
    """Each chunk of encode_update as its own PUBLISH (pid 1, 2, ...)."""
    chunks = wire_host.encode_update(
        "job", "w1", 77, 3, 4, 5, 0.25, 16, 0.5, grad(n), max_chunk=1024, key=key
    )
    topic = wire.topic_up("job", "w1")
    return [mp.publish_packet(topic, c, qos=1, pid=i + 1) for i, c in enumerate(chunks)]


@pytest.mark.parametrize("key", [None, b"k" * 32])
def test_publish_frame_sends_the_bytes_publish_would(key: bytes | None) -> None:
    # Prepare
    link = FakeBrokerLink(drop_pubacks=1)
    c = MQTTClient("c1", opener=lambda host, port, timeout: link, timeout_ms=1)  # type: ignore[arg-type]
    c.connect("w/t", b"bye")
    plan = wire.update_plan("job", "w1", 77, 3, 4, 5, 0.25, 16, 0.5, grad(N),
                            max_chunk=1024, key=key)  # fmt: skip
    topic = wire.topic_up("job", "w1")

    # Execute
    for i in range(plan[0]):
        c.publish_frame(topic, wire.chunk_len(plan, i), wire.chunk_frame, plan, i)

    # Assert: chunk 0 sent twice (the second time with DUP), then the rest
    want = expected(N, key)
    dup = bytes([want[0][0] | 0x08]) + want[0][1:]
    assert len(want) == plan[0] > 1
    assert link.packets[1:] == [want[0], dup, *want[1:]]


def test_chunk_frame_without_a_buffer_is_the_encoded_chunk() -> None:
    # Prepare
    plan = wire.update_plan("job", "w1", 77, 3, 4, 5, 0.25, 16, 0.5, b"",
                            max_chunk=128)  # fmt: skip
    out = bytearray(100)

    # Execute
    n = wire.chunk_frame(out, 7, plan, 0)

    # Assert: an empty UPDATE is one chunk, framed at the offset asked for
    want = wire_host.encode_update("job", "w1", 77, 3, 4, 5, 0.25, 16, 0.5, b"")
    assert plan[0] == 1 and n == wire.chunk_len(plan, 0) == len(want[0])
    assert bytes(out[7 : 7 + n]) == want[0] == wire.chunk_frame(None, 0, plan, 0)
    assert out[:7] == bytes(7) and out[7 + n :] == bytes(100 - 7 - n)


@pytest.mark.firmware
@pytest.mark.parametrize("key", ["", "secret-key"])
def test_board_worker_frames_each_update_chunk_in_place(
    micropython: str, key: str
) -> None:
    # Execute: the worker's push, through the firmware client, under MicroPython
    proc = run_micropython(micropython, SCRIPT, str(N), *([key] if key else []))

    # Assert: the bytes of encode_update, the withheld PUBACK's chunk twice
    assert proc.returncode == 0, proc.stderr
    got = [bytes.fromhex(line) for line in proc.stdout.split()]
    want = expected(N, key.encode() or None)
    dup = bytes([want[1][0] | 0x08]) + want[1][1:]
    assert got == [want[0], want[1], dup, *want[2:]]
