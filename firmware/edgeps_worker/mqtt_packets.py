"""MQTT 3.1.1 packet building and parsing: pure functions over bytes, no I/O.

The client is strict about what a broker may send it (``check_header``): the
worker subscribes at QoS 1 only and never sends QoS 2, so a QoS 2 PUBLISH is
a protocol violation like a QoS 3 one; the QoS 2 flow is not implemented.
"""

import struct

CONNECT = 0x10
CONNACK = 0x20
PUBLISH = 0x30
PUBACK = 0x40
SUBSCRIBE = 0x80
SUBACK = 0x90
PINGREQ = 0xC0
PINGRESP = 0xD0
DISCONNECT = 0xE0

PINGREQ_BYTES = b"\xc0\x00"
DISCONNECT_BYTES = b"\xe0\x00"
MAX_REMAINING = 268435455  # largest value four varint bytes can carry


def _b(s):
    if isinstance(s, str):
        return s.encode()
    return bytes(s)


def varint(n):
    """The remaining-length encoding (1..4 bytes, 7 bits each, low first)."""
    if n < 0 or n > MAX_REMAINING:
        raise ValueError("remaining length out of range: %d" % n)
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def read_varint(buf, i, end):
    """(value, index after it) from buf[i:end], or None if more bytes are needed.

    Raises ValueError past four bytes (a corrupt stream).
    """
    n = 0
    shift = 0
    while i < end:
        b = buf[i]
        n |= (b & 0x7F) << shift
        i += 1
        if not b & 0x80:
            return n, i
        shift += 7
        if shift >= 28:
            raise ValueError("remaining length longer than 4 bytes")
    return None


def publish_head(buf, topic, n_payload, qos, retain, pid, dup=False):
    """A PUBLISH up to its payload into buf (grown if too small), for a payload
    of n_payload bytes; (buf, index of the payload, packet length)."""
    t = _b(topic)
    rl = 2 + len(t) + (2 if qos else 0) + n_payload
    head = varint(rl)
    total = 1 + len(head) + rl
    if len(buf) < total:
        buf = bytearray(total + 64)
    buf[0] = PUBLISH | (0x08 if dup else 0) | (qos & 3) << 1 | (1 if retain else 0)
    i = 1 + len(head)
    buf[1:i] = head
    struct.pack_into("!H", buf, i, len(t))
    i += 2
    buf[i : i + len(t)] = t
    i += len(t)
    if qos:
        struct.pack_into("!H", buf, i, pid)
        i += 2
    return buf, i, total


def publish_into(buf, topic, payload, qos, retain, pid, dup=False):
    """Write one PUBLISH into buf (grown if too small); returns (buf, length)."""
    buf, i, total = publish_head(buf, topic, len(payload), qos, retain, pid, dup)
    buf[i:total] = payload
    return buf, total


def publish_packet(topic, payload, qos=0, retain=False, pid=0, dup=False):
    """PUBLISH as bytes (tests and one-off use; the client reuses a buffer)."""
    buf, n = publish_into(bytearray(0), topic, _b(payload), qos, retain, pid, dup)
    return bytes(buf[:n])


def puback_packet(pid):
    """PUBACK for an incoming QoS 1 PUBLISH."""
    return struct.pack("!BBH", PUBACK, 2, pid)


def parse_u16(body, i):
    """Big-endian u16 at body[i], or -1 if the body is too short."""
    if len(body) < i + 2:
        return -1
    return body[i] << 8 | body[i + 1]


def parse_publish(first, body, copy=True):
    """(topic str, payload bytes, qos, pid) of a PUBLISH body, None if malformed.

    ``copy=False``: the payload is a view into ``body``, not bytes.
    """
    qos = (first >> 1) & 3
    tl = parse_u16(body, 0)
    i = 2 + tl
    if tl < 0 or len(body) < i or qos == 3:
        return None
    try:
        topic = bytes(body[2:i]).decode()
    except Exception:
        return None
    pid = 0
    if qos:
        pid = parse_u16(body, i)
        if pid <= 0:
            return None
        i += 2
    return topic, bytes(body[i:]) if copy else body[i:], qos, pid


def check_header(first, rl, connected):
    """Why a packet a broker sent breaks MQTT 3.1.1, or None if it may come.

    ``first`` is the fixed-header byte, ``rl`` the remaining length and
    ``connected`` whether CONNACK was received. The first packet after
    CONNECT must be CONNACK [MQTT-3.2.0-1], and only once; reserved flag bits
    must be as the spec says [MQTT-2.2.2-2]; a PUBLISH has QoS 0 without DUP
    [MQTT-3.3.1-2] or QoS 1: QoS 3 does not exist [MQTT-3.3.1-4] and QoS 2
    was never subscribed to. Acks and PINGRESP have their fixed lengths.
    """
    if not connected:
        return None if first == CONNACK and rl == 2 else "packet before CONNACK"
    if first & 0xF0 == PUBLISH:
        qos = (first >> 1) & 3
        if qos > 1 or not qos and first & 0x08:
            return "PUBLISH flags 0x%02x" % first
        return None
    if first == PUBACK and rl == 2 or first == SUBACK and rl == 3:
        return None
    if first == PINGRESP and rl == 0:
        return None
    return "unexpected packet 0x%02x" % first
