"""Connecting an MQTT 3.1.1 link: CONNECT, SUBSCRIBE and their acks; dropping
a PUBLISH longer than the receive buffer.

Code a board runs only while it (re)connects or meets an oversized message:
``MQTTClient`` imports this module for the call (``_rare``) and, on
MicroPython, unloads it after, so its bytecode is off the heap between uses
(its names stay interned). Pure packet functions, then the client steps.
"""

import errno
import struct

from edgeps_worker import mqtt_link as _l
from edgeps_worker import mqtt_packets as _p


def _str(out, s):
    out += struct.pack("!H", len(s))
    out += s


def connect_packet(
    client_id,
    keepalive=60,
    clean=True,
    will_topic=None,
    will_payload=None,
    will_qos=1,
    will_retain=False,
    user=None,
    password=None,
):
    """CONNECT with optional last will and username/password.

    A password needs a username: MQTT 3.1.1 forbids the password flag alone
    [MQTT-3.1.2-22], and brokers close such a connection.
    """
    if not 0 <= keepalive <= 0xFFFF:
        raise ValueError("keepalive out of range")
    if password is not None and user is None:
        raise ValueError("a password needs a username [MQTT-3.1.2-22]")
    flags = 0x02 if clean else 0
    body = bytearray(b"\x00\x04MQTT\x04")
    payload = bytearray()
    _str(payload, _p._b(client_id))
    if will_topic is not None:
        flags |= 0x04 | (will_qos & 3) << 3 | (0x20 if will_retain else 0)
        _str(payload, _p._b(will_topic))
        _str(payload, _p._b(will_payload if will_payload is not None else b""))
    if user is not None:
        flags |= 0x80
        _str(payload, _p._b(user))
    if password is not None:
        flags |= 0x40
        _str(payload, _p._b(password))
    body.append(flags)
    body += struct.pack("!H", keepalive)
    body += payload
    return bytes(bytearray([_p.CONNECT]) + _p.varint(len(body)) + body)


def subscribe_packet(pid, topic, qos=1):
    """SUBSCRIBE to one topic filter."""
    body = bytearray(struct.pack("!H", pid))
    _str(body, _p._b(topic))
    body.append(qos & 3)
    return bytes(bytearray([_p.SUBSCRIBE | 0x02]) + _p.varint(len(body)) + body)


def parse_connack(body, clean=True):
    """Return code of a CONNACK body (0 = accepted); 255 if malformed.

    Reserved bits, and a session present flag after a clean-session CONNECT
    [MQTT-3.2.2-1], make it malformed too.
    """
    if len(body) != 2 or body[0] & (0xFF if clean else 0xFE):
        return 255
    return body[1]


def parse_suback(body):
    """(packet id, granted qos or 0x80) of a one-topic SUBACK; None if malformed."""
    if len(body) != 3:
        return None
    return _p.parse_u16(body, 0), body[2]


def open_link(host, port, timeout_ms, ssl_context, server_hostname):
    """For SocketLink: a connected non-blocking socket (TLS if asked), its send,
    its read-into, a poll object on it and the poll masks (in, out, bad)."""
    import select
    import socket

    ai = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
    addr = ai[-1]
    s = socket.socket(ai[0], socket.SOCK_STREAM)
    try:
        s.settimeout(timeout_ms / 1000)
        s.connect(addr)
        try:
            # one packet is one write, so this only removes waits for ACKs
            s.setsockopt(
                getattr(socket, "IPPROTO_TCP", 6),
                getattr(socket, "TCP_NODELAY", 1),
                1,
            )
        except (OSError, AttributeError, TypeError):
            pass
        if ssl_context is not None:
            try:
                s = ssl_context.wrap_socket(s, server_hostname=server_hostname)
            except (ValueError, RuntimeError) as exc:
                # MicroPython reports a bad certificate as ValueError
                raise OSError(_l.ECONNRESET, "TLS: " + str(exc).strip()) from None
        s.setblocking(False)
    except BaseException:
        s.close()
        raise
    # MicroPython TLS sockets may lack send(); write() does the same
    send = getattr(s, "send", None) or s.write
    # CPython sockets have recv_into, MicroPython ones readinto
    reader = getattr(s, "recv_into", None) or getattr(s, "readinto", None)
    if reader is None:
        s.close()
        raise OSError(errno.EINVAL, "socket cannot read into a buffer")
    poll = select.poll()
    poll.register(s, select.POLLIN)
    bad = select.POLLERR | select.POLLHUP
    return s, send, reader, poll, select.POLLIN, select.POLLOUT, bad


def connect(c, will_topic, will_payload, will_retain, clean):
    """MQTTClient.connect: open the link, send CONNECT, wait for CONNACK."""
    c.close_link()
    client_id, server, port, user, password = c._login
    nodes = None
    if not isinstance(server, str):
        # the nodes of one broker cluster, ((host, port), ...): a connect tries
        # the first; a failed one moves it last, so the next try is the next node
        nodes = server
        server, port = nodes[0]
    c._r0 = c._r1 = c._skip = 0
    c._queue = []
    c._ping_sent = None
    c._acked = False
    try:
        c._link = c._opener(server, port, c.timeout_ms)
        pkt = connect_packet(
            client_id,
            c.keepalive,
            clean,
            will_topic,
            will_payload,
            1,
            will_retain,
            user,
            password,
        )
        c._send(memoryview(pkt))
        got = c._wait_for(_p.CONNACK, None, _l.ticks_ms(), c.timeout_ms)
        if got is None:
            raise OSError(_l.ETIMEDOUT, "no CONNACK")
        c._acked = True
        rc = parse_connack(got, clean)
        if rc == 255:
            c._violation("malformed CONNACK")
        if rc != 0:
            raise OSError(_l.ECONNRESET, "broker refused connection: rc=%d" % rc)
    except BaseException:
        c.close_link()
        if nodes is not None and len(nodes) > 1:
            c._login = (client_id, nodes[1:] + nodes[:1], port, user, password)
        raise


def subscribe(c, topic, qos):
    """MQTTClient.subscribe: SUBSCRIBE, then wait for the SUBACK."""
    pid = c._next_pid()
    pkt = subscribe_packet(pid, topic, qos)
    for _ in range(c.retries + 1):
        c._send(memoryview(pkt))
        got = c._wait_for(_p.SUBACK, pid, _l.ticks_ms(), c.timeout_ms)
        if got is not None:
            ack = parse_suback(got)
            if ack is None or ack[1] == 0x80:
                raise OSError(_l.ECONNRESET, "subscription refused: " + str(topic))
            if ack[1] > qos:  # a broker may grant less, never more
                c._violation("SUBACK granted QoS %d" % ack[1])
            return
    c._dead("no SUBACK")


def oversized(c, off, rl, t0, timeout_ms):
    """A PUBLISH longer than max_packet at ``c._r0`` (its body at ``off``): the
    length of its head (topic, packet id) to read as a packet, with the rest
    left to ``drain`` (``c._skip``); None while the head is incomplete."""
    if not c._fill(off + 2, t0, timeout_ms):
        return None
    n = _p.parse_u16(c._rbuf, c._r0 + off) + 4
    if n > c.max_packet:  # a topic no subscription of a board has
        c._dead("PUBLISH topic of %d bytes exceeds max_packet" % n)
    if not c._fill(off + n, t0, timeout_ms):
        return None  # nothing consumed: the next read starts at its header again
    c._skip = rl - n
    return n


def drain(c, t0, timeout_ms):
    """Discard the rest of an oversized PUBLISH a buffer at a time; False at
    the deadline (what is left stays in ``c._skip`` for the next read)."""
    while c._skip:
        n = min(c._skip, c._r1 - c._r0)
        c._skip -= n
        c._r0 += n
        if c._r0 == c._r1:
            c._r0 = c._r1 = 0
        if c._skip and not c._fill(min(c._skip, len(c._rbuf)), t0, timeout_ms):
            return False
    return True
