"""Client behaviour over a scripted fake link: acks, retries, partial I/O, EOF."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from edgeps_worker import mqtt_open as mo
from edgeps_worker import mqtt_packets as mp
from edgeps_worker.mqtt import MQTTClient
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_micropython


class FakeBrokerLink:
    """Answers like a broker, byte by byte if asked; records what it was sent.

    drop_pubacks: PUBACKs withheld (the first N), to force DUP resends.
    chunk: the largest read or write the link accepts in one call.
    """

    def __init__(self, drop_pubacks: int = 0, chunk: int = 1 << 16, rc: int = 0):
        self.sent = bytearray()
        self.inbox = bytearray()
        self.packets: list[bytes] = []
        self.drop_pubacks = drop_pubacks
        self.chunk = chunk
        self.rc = rc
        self.eof = False
        self.answer_pings = True
        self.closed = False
        self._pending = bytearray()

    def send(self, mv: memoryview) -> int:
        n = min(len(mv), self.chunk)
        self.sent += mv[:n]
        self._pending += mv[:n]
        self._answer()
        return n

    def recv_into(self, mv: memoryview) -> int | None:
        if not self.inbox:
            if self.eof:
                raise OSError(errno.ECONNRESET, "closed")
            return None
        n = min(len(mv), len(self.inbox), self.chunk)
        mv[:n] = self.inbox[:n]
        del self.inbox[:n]
        return n

    def wait(self, writable: bool, timeout_ms: int) -> bool:
        return writable or bool(self.inbox) or self.eof

    def close(self) -> None:
        self.closed = True

    def _answer(self) -> None:
        while len(self._pending) >= 2:
            hdr = mp.read_varint(self._pending, 1, len(self._pending))
            if hdr is None or hdr[1] + hdr[0] > len(self._pending):
                return
            rl, start = hdr
            pkt = bytes(self._pending[: start + rl])
            del self._pending[: start + rl]
            self.packets.append(pkt)
            kind, body = pkt[0] & 0xF0, pkt[start:]
            if kind == mp.CONNECT:
                self.inbox += bytes([0x20, 2, 0, self.rc])
            elif kind == mp.SUBSCRIBE:
                self.inbox += bytes([0x90, 3]) + body[:2] + b"\x01"
            elif kind == mp.PUBLISH and pkt[0] & 0x06:
                if self.drop_pubacks:
                    self.drop_pubacks -= 1
                    continue
                pid = body[2 + (body[0] << 8 | body[1]) :][:2]
                self.inbox += b"\x40\x02" + pid
            elif kind == mp.PINGREQ and self.answer_pings:
                self.inbox += b"\xd0\x00"


def _client(link: FakeBrokerLink, **kw: object) -> MQTTClient:
    c = MQTTClient("c1", opener=lambda host, port, timeout: link, **kw)  # type: ignore[arg-type]
    c.connect("w/t", b"bye")
    return c


def test_connect_sends_will_and_reads_connack() -> None:
    # Prepare
    link = FakeBrokerLink()

    # Execute
    c = _client(link, keepalive=30)

    # Assert
    assert c.connected
    assert link.packets[0] == mo.connect_packet("c1", 30, True, "w/t", b"bye", 1)


def test_refused_connection_raises_and_closes() -> None:
    # Prepare
    link = FakeBrokerLink(rc=5)

    # Execute / Assert
    with pytest.raises(OSError):
        _client(link)
    assert link.closed


def test_qos1_publish_waits_for_puback_of_its_own_id() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link)

    # Execute
    c.publish("t", b"one")
    c.publish("t", b"two")

    # Assert
    assert link.packets[1] == mp.publish_packet("t", b"one", qos=1, pid=1)
    assert link.packets[2] == mp.publish_packet("t", b"two", qos=1, pid=2)
    assert link.inbox == b""  # both PUBACKs consumed


def test_missing_puback_resends_with_dup_then_succeeds() -> None:
    # Prepare
    link = FakeBrokerLink(drop_pubacks=2)
    c = _client(link, timeout_ms=1)

    # Execute
    c.publish("t", b"x")

    # Assert
    first, *again = link.packets[1:]
    assert first == mp.publish_packet("t", b"x", qos=1, pid=1)
    assert again == [mp.publish_packet("t", b"x", qos=1, pid=1, dup=True)] * 2
    assert c.resent == 2


def test_puback_never_coming_declares_the_link_dead() -> None:
    # Prepare
    link = FakeBrokerLink(drop_pubacks=100)
    c = _client(link, timeout_ms=1, retries=2)

    # Execute / Assert
    with pytest.raises(OSError):
        c.publish("t", b"x")
    assert not c.connected and link.closed
    assert len(link.packets) == 1 + 3


def test_packet_ids_skip_zero_when_wrapping() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link)
    c._pid = 65534

    # Execute
    for _ in range(3):
        c.publish("t", b"", qos=1)

    # Assert
    pids = [p[-2] << 8 | p[-1] for p in link.packets[1:]]
    assert pids == [65535, 1, 2]


def test_partial_writes_and_one_byte_reads_still_work() -> None:
    # Prepare
    link = FakeBrokerLink(chunk=1)
    c = _client(link)
    c.subscribe("in", 1)
    incoming = mp.publish_packet("in", b"\x07" * 300, qos=1, pid=9)

    # Execute
    c.publish("t", b"y" * 500)
    link.inbox += incoming
    got = c.poll(100)

    # Assert
    assert got == ("in", b"\x07" * 300)
    assert link.packets[-1] == mp.puback_packet(9)


def test_incoming_publish_during_puback_wait_is_kept_for_poll() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link)
    link.inbox += mp.publish_packet("down", b"params", qos=0)

    # Execute
    c.publish("up", b"grad")
    got = c.poll(0)

    # Assert
    assert got == ("down", b"params")


def test_payload_views_point_into_the_receive_buffer_unless_queued() -> None:
    # Prepare: one message arrives during a PUBACK wait (queued), one later
    link = FakeBrokerLink()
    c = _client(link, payload_views=True)
    link.inbox += mp.publish_packet("down", b"queued", qos=1, pid=7)
    c.publish("up", b"grad")
    link.inbox += mp.publish_packet("down", b"direct", qos=1, pid=8)

    # Execute
    first = c.poll(0)
    second = c.poll(0)
    assert second is not None
    seen = bytes(second[1])  # read before the next call, as the contract says
    link.inbox += mp.publish_packet("down", b"XXXXXX", qos=1, pid=9)
    third = c.poll(0)

    # Assert: the queued copy is bytes and survives; the direct one was a view
    assert first == ("down", b"queued")
    assert isinstance(second[1], memoryview) and seen == b"direct"
    assert third is not None and bytes(third[1]) == b"XXXXXX"
    assert first[1] == b"queued"


def test_buffers_allocated_early_are_used_and_checked() -> None:
    # Prepare: buffers a board took before its imports fragmented the heap
    wbuf, rbuf = bytearray(300), bytearray(261)
    link = FakeBrokerLink()
    c = _client(link, max_packet=256, buffers=(wbuf, rbuf))
    link.inbox += mp.publish_packet("down", b"params", qos=0)

    # Execute
    c.publish("up", b"grad")
    got = c.poll(0)

    # Assert: the packets went through exactly these buffers
    assert got == ("down", b"params")
    assert bytes(wbuf).find(b"grad") > 0 and bytes(rbuf).find(b"params") > 0
    with pytest.raises(ValueError):
        MQTTClient("c2", max_packet=256, buffers=(bytearray(300), bytearray(260)))


def test_poll_times_out_with_none() -> None:
    # Prepare
    c = _client(FakeBrokerLink())

    # Execute / Assert
    assert c.poll(5) is None


def test_peer_closing_raises_oserror_not_a_hang() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link)
    link.eof = True

    # Execute / Assert
    with pytest.raises(OSError):
        c.poll(1000)
    assert not c.connected
    with pytest.raises(OSError):
        c.publish("t", b"x")


def test_idle_poll_sends_pingreq_and_missing_pingresp_kills_link() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link, keepalive=1, timeout_ms=1)
    c._last_send -= 1000  # as if idle for a whole keepalive period
    link.answer_pings = False

    # Execute
    c.poll(1)
    c._ping_sent -= 2000  # and no PINGRESP since

    # Assert
    assert link.packets[-1] == mp.PINGREQ_BYTES
    with pytest.raises(OSError):
        c.poll(1)


def test_corrupt_remaining_length_drops_the_link() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link)
    link.inbox += b"\x30\xff\xff\xff\xff\x01"

    # Execute / Assert
    with pytest.raises(OSError):
        c.poll(10)
    assert not c.connected


def test_malformed_incoming_publish_is_counted_and_skipped() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link)
    link.inbox += b"\x30\x03\x00\x05a" + mp.publish_packet("ok", b"1")

    # Execute
    got = c.poll(10)

    # Assert
    assert got == ("ok", b"1") and c.dropped == 1


def test_close_sends_disconnect_and_abort_does_not() -> None:
    # Prepare
    a, b = FakeBrokerLink(), FakeBrokerLink()
    ca, cb = _client(a), _client(b)

    # Execute
    ca.close()
    cb.close_link()

    # Assert
    assert a.packets[-1] == mp.DISCONNECT_BYTES and a.closed
    assert b.packets[-1] != mp.DISCONNECT_BYTES and b.closed


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=64), st.integers(1, 7))
def test_fuzz_garbage_from_the_broker_only_raises_oserror(
    garbage: bytes, chunk: int
) -> None:
    # Prepare: a connected client, then arbitrary bytes and a closed stream
    link = FakeBrokerLink()
    c = _client(link, timeout_ms=1)
    link.chunk = chunk
    link.inbox += garbage
    link.eof = True

    # Execute: poll until the stream is exhausted; only OSError may escape
    seen = 0
    with pytest.raises(OSError):
        for _ in range(100):
            if c.poll(1) is not None:
                seen += 1

    # Assert
    assert not c.connected and seen <= len(garbage)


@pytest.mark.firmware
def test_scripted_link_checks_under_micropython(micropython: str) -> None:
    # Execute
    script = str(Path(__file__).parents[1] / "helpers" / "mpy" / "mqtt_fake.py")
    proc = run_micropython(micropython, script)

    # Assert
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        "ok",
        "wrap",
        "ok",
        "dup",
        "ok",
        "incoming",
        "ok",
        "puback",
    ]


def test_zero_timeout_poll_still_returns_a_waiting_message() -> None:
    # Prepare
    link = FakeBrokerLink()
    c = _client(link)
    link.inbox += mp.publish_packet("down", b"x", qos=1, pid=3)

    # Execute
    got = c.poll(0)

    # Assert
    assert got == ("down", b"x") and link.packets[-1] == mp.puback_packet(3)


def test_large_packet_behind_a_small_one_survives_buffer_compaction() -> None:
    # Prepare: both arrive in one read; the second outgrows the read buffer
    link = FakeBrokerLink()
    c = _client(link)
    big = bytes(range(256)) * 12
    link.inbox += mp.publish_packet("a", b"small") + mp.publish_packet("b", big)

    # Execute
    first, second = c.poll(10), c.poll(10)

    # Assert
    assert first == ("a", b"small") and second == ("b", big)
