"""Strict MQTT 3.1.1 and deadlines that hold whatever the peer sends."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from edgeps_worker import mqtt_open as mo
from edgeps_worker import mqtt_packets as mp

from tests.conftest import FIRMWARE, run_micropython

MPY = Path(__file__).parents[1] / "helpers" / "mpy"


def _lines(out: str) -> list[str]:
    return [x for x in out.splitlines() if x]


CHECKS = [
    "qos3", "qos2", "dup_qos0", "pubrel", "pingresp_flags", "second_connack",
    "before_connack", "session_present", "suback_qos2", "qos1_ok", "flood_pingresp",
    "flood_publish", "flood_poll", "password_needs_user", "connect_packet_refuses",
    "rbuf_once", "rbuf_size", "trickle_send",
]  # fmt: skip


@pytest.mark.firmware
def test_strict_client_under_micropython(micropython: str) -> None:
    # Execute
    proc = run_micropython(micropython, str(MPY / "mqtt_strict.py"))

    # Assert
    assert proc.returncode == 0, proc.stderr
    assert _lines(proc.stdout) == ["ok " + name for name in CHECKS]


def test_strict_client_under_cpython() -> None:
    # Execute
    proc = subprocess.run(
        [sys.executable, str(MPY / "mqtt_strict.py")], capture_output=True,
        text=True, timeout=60, cwd=FIRMWARE, env={"PYTHONPATH": str(FIRMWARE)},
    )  # fmt: skip

    # Assert
    assert proc.returncode == 0, proc.stderr
    assert _lines(proc.stdout) == ["ok " + name for name in CHECKS]


@pytest.mark.parametrize(
    ("first", "rl", "connected", "why"),
    [
        (0x20, 2, False, None),
        (0x30, 5, False, "packet before CONNACK"),
        (0xD0, 0, False, "packet before CONNACK"),
        (0x21, 2, False, "packet before CONNACK"),  # CONNACK with flags set
        (0x20, 3, False, "packet before CONNACK"),  # nor with a longer body
        (0x20, 2, True, "unexpected packet 0x20"),  # a second CONNACK
        (0x30, 5, True, None),
        (0x32, 5, True, None),
        (0x3B, 5, True, None),  # QoS 1, DUP, retain
        (0x34, 5, True, "PUBLISH flags 0x34"),
        (0x36, 5, True, "PUBLISH flags 0x36"),
        (0x38, 5, True, "PUBLISH flags 0x38"),
        (0x40, 2, True, None),
        (0x40, 3, True, "unexpected packet 0x40"),
        (0x90, 3, True, None),
        (0x92, 3, True, "unexpected packet 0x92"),
        (0xD0, 0, True, None),
        (0xD0, 1, True, "unexpected packet 0xd0"),
        (0x50, 2, True, "unexpected packet 0x50"),  # PUBREC: we never send QoS 2
        (0xB0, 2, True, "unexpected packet 0xb0"),  # UNSUBACK
        (0x10, 2, True, "unexpected packet 0x10"),  # CONNECT, a client's packet
        (0xC0, 0, True, "unexpected packet 0xc0"),  # PINGREQ
        (0x00, 0, True, "unexpected packet 0x00"),  # reserved
        (0xF0, 0, True, "unexpected packet 0xf0"),  # reserved
    ],
)
def test_check_header(first: int, rl: int, connected: bool, why: str | None) -> None:
    assert mp.check_header(first, rl, connected) == why


def test_connack_with_reserved_bits_or_session_present_is_malformed() -> None:
    assert mo.parse_connack(b"\x02\x00") == 255
    assert mo.parse_connack(b"\x01\x00") == 255  # clean session: never present
    assert mo.parse_connack(b"\x01\x00", clean=False) == 0


class FloodingPeer:
    """A TCP peer that accepts CONNECT, then answers a PUBLISH with endless PINGRESP.

    ``closed_while_flooding`` is set when the client hung up while it was still
    flooding (it floods for at most ``limit`` seconds of packets, then stops).
    """

    def __init__(self, limit_packets: int = 2_000_000) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.limit_packets = limit_packets
        self.closed_while_flooding = False
        self.sent = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.settimeout(10)
            conn.recv(1024)  # CONNECT
            conn.sendall(b"\x20\x02\x00\x00")
            conn.recv(1024)  # the PUBLISH it will never see a PUBACK for
            burst = b"\xd0\x00" * 512
            try:
                while self.sent < self.limit_packets:
                    conn.sendall(burst)
                    self.sent += 512
            except OSError:
                self.closed_while_flooding = True

    def close(self) -> None:
        self.thread.join(timeout=60)
        self.sock.close()


@pytest.mark.firmware
def test_publish_gives_up_while_the_peer_still_floods(micropython: str) -> None:
    # Prepare
    peer = FloodingPeer()

    # Execute
    try:
        proc = run_micropython(
            micropython, str(MPY / "mqtt_flood.py"), str(peer.port), timeout=120
        )
    finally:
        peer.close()

    # Assert: publish ended by its own deadline, not when the flood ran dry
    assert proc.stdout.strip() == "gave-up no PUBACK for packet 1", proc.stderr
    assert peer.closed_while_flooding and peer.sent < peer.limit_packets
