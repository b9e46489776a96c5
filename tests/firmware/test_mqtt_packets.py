"""MQTT 3.1.1 packets of the firmware client against hand-checked golden bytes."""

from __future__ import annotations

import pytest
from edgeps_worker import mqtt_open as mo
from edgeps_worker import mqtt_packets as mp


@pytest.mark.parametrize(
    ("n", "hex_"),
    [
        (0, "00"),
        (127, "7f"),
        (128, "8001"),
        (16383, "ff7f"),
        (16384, "808001"),
        (2097151, "ffff7f"),
        (2097152, "80808001"),
        (268435455, "ffffff7f"),
    ],
)
def test_remaining_length_encodes_and_decodes(n: int, hex_: str) -> None:
    # Execute
    enc = mp.varint(n)
    dec = mp.read_varint(bytes.fromhex("ff" + hex_), 1, 1 + len(enc))

    # Assert
    assert enc.hex() == hex_
    assert dec == (n, 1 + len(enc))


def test_remaining_length_bounds() -> None:
    # Assert
    with pytest.raises(ValueError):
        mp.varint(268435456)
    with pytest.raises(ValueError):
        mp.read_varint(b"\x80\x80\x80\x80\x01", 0, 5)
    assert mp.read_varint(b"\x80\x80", 0, 2) is None  # needs more bytes


def test_connect_with_will_and_auth() -> None:
    # Execute
    pkt = mo.connect_packet("c1", 60, True, "w/t", b"bye", 1, False, "u", "p")

    # Assert
    assert pkt.hex() == (
        "10"
        "1e"  # CONNECT, remaining length 30
        "00044d515454"
        "04"  # "MQTT", level 4
        "ce"  # user, password, will qos 1, will, clean session
        "003c"  # keepalive 60 s
        "00026331"  # client id "c1"
        "0003772f74"
        "0003627965"  # will topic "w/t", will message "bye"
        "000175"
        "000170"  # user "u", password "p"
    )


def test_connect_minimal_without_clean_session() -> None:
    # Execute
    pkt = mo.connect_packet(b"c1", 0, False)

    # Assert
    assert pkt.hex() == "100e00044d5154540400000000026331"


def test_connect_with_retained_will() -> None:
    # Execute
    flags = mo.connect_packet("c", 10, True, "t", b"", 1, True)[9]

    # Assert: clean 0x02 | will 0x04 | qos1 0x08 | will retain 0x20
    assert flags == 0x2E


def test_publish_qos0() -> None:
    # Assert
    assert mp.publish_packet("a/b", b"hi").hex() == "30070003612f626869"


def test_publish_qos1_retain_dup() -> None:
    # Execute
    pkt = mp.publish_packet("a/b", b"hi", qos=1, retain=True, pid=10, dup=True)

    # Assert
    assert pkt.hex() == "3b090003612f62000a6869"


def test_publish_with_two_byte_remaining_length() -> None:
    # Execute
    pkt = mp.publish_packet("t", b"\xaa" * 200, qos=1, pid=1)

    # Assert: remaining length 205 = 0xcd 0x01
    assert pkt[:8].hex() == "32cd010001740001"
    assert pkt[8:] == b"\xaa" * 200


def test_publish_into_reuses_a_big_enough_buffer() -> None:
    # Prepare
    buf = bytearray(64)

    # Execute
    same, n = mp.publish_into(buf, "a", b"xy", 1, False, 7)
    grown, m = mp.publish_into(buf, "a", b"z" * 100, 1, False, 8)

    # Assert
    assert same is buf and bytes(buf[:n]).hex() == "320700016100077879"
    assert grown is not buf and m == 107  # header, length, topic, pid, payload


def test_subscribe_ping_disconnect_puback() -> None:
    # Assert
    assert mo.subscribe_packet(1, "a/+", 1).hex() == "820800010003612f2b01"
    assert mp.PINGREQ_BYTES.hex() == "c000"
    assert mp.DISCONNECT_BYTES.hex() == "e000"
    assert mp.puback_packet(0x1234).hex() == "40021234"


def test_parse_incoming_packets() -> None:
    # Assert
    assert mo.parse_connack(b"\x00\x00") == 0
    assert mo.parse_connack(b"\x00\x05") == 5
    assert mo.parse_connack(b"\x00") == 255
    assert mo.parse_suback(bytes.fromhex("000101")) == (1, 1)
    assert mo.parse_suback(bytes.fromhex("000180")) == (1, 0x80)
    assert mo.parse_suback(b"\x00") is None
    body = bytes.fromhex("0003612f6201026869")
    assert mp.parse_publish(0x32, body) == ("a/b", b"hi", 1, 0x0102)
    assert mp.parse_publish(0x30, bytes.fromhex("0003612f626869")) == (
        "a/b",
        b"hi",
        0,
        0,
    )


@pytest.mark.parametrize(
    ("first", "body"),
    [
        (0x30, b"\x00"),  # no room for the topic length
        (0x30, b"\x00\x05ab"),  # topic longer than the body
        (0x32, b"\x00\x01a"),  # QoS 1 without a packet id
        (0x32, b"\x00\x01a\x00\x00"),  # packet id 0 is illegal
        (0x36, b"\x00\x01ax"),  # QoS 3 does not exist
        (0x30, b"\x00\x02\xff\xfe"),  # topic not UTF-8
    ],
)
def test_malformed_publish_is_none(first: int, body: bytes) -> None:
    # Assert
    assert mp.parse_publish(first, body) is None
