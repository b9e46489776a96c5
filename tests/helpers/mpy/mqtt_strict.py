"""Strict MQTT 3.1.1 and bounded waits of the firmware client over scripted links.

Runs under MicroPython and CPython. Each check prints 'ok NAME' or 'FAIL NAME'.
"""

from edgeps_worker import clock
from edgeps_worker import mqtt_open as mo
from edgeps_worker import mqtt_packets as mp
from edgeps_worker.mqtt import MQTTClient

CONNACK = b"\x20\x02\x00\x00"


class ScriptedLink:
    """Answers CONNECT with ``first`` and SUBSCRIBE with a SUBACK; records sends.

    ``forever``: bytes handed out again on every read once the inbox is empty
    (a peer that never stops sending); ``pubacks``: answer QoS 1 PUBLISH.
    """

    def __init__(self, first=CONNACK, forever=b"", pubacks=True):
        self.first = first
        self.forever = forever
        self.pubacks = pubacks
        self.inbox = bytearray()
        self.packets = []
        self.closed = False
        self.reads = 0

    def send(self, mv):
        pkt = bytes(mv)
        self.packets.append(pkt)
        kind = pkt[0] & 0xF0
        if kind == mp.CONNECT:
            self.inbox += self.first
        elif kind == mp.SUBSCRIBE:
            self.inbox += b"\x90\x03" + pkt[2:4] + b"\x01"
        elif kind == mp.PUBLISH and pkt[0] & 0x06 and self.pubacks:
            hdr = mp.read_varint(pkt, 1, len(pkt))
            start = hdr[1]
            at = start + 2 + (pkt[start] << 8 | pkt[start + 1])
            self.inbox += b"\x40\x02" + pkt[at : at + 2]
        return len(pkt)

    def recv_into(self, mv):
        self.reads += 1
        if not self.inbox and self.forever:
            self.inbox += self.forever
        if not self.inbox:
            return None
        n = min(len(mv), len(self.inbox))
        mv[:n] = self.inbox[:n]
        self.inbox = self.inbox[n:]
        return n

    def wait(self, writable, timeout_ms):
        return writable or bool(self.inbox) or bool(self.forever)

    def close(self):
        self.closed = True


def client(link, **kw):
    return MQTTClient("strict", opener=lambda h, p, t: link, timeout_ms=50, **kw)


def raises_oserror(fn):
    try:
        fn()
    except OSError:
        return True
    return False


def check(name, ok):
    print(("ok " if ok else "FAIL ") + name)


def violation_on_poll(incoming):
    link = ScriptedLink()
    c = client(link)
    c.connect()
    link.inbox += incoming
    return raises_oserror(lambda: c.poll(50)) and link.closed and c.violations == 1


check("qos3", violation_on_poll(b"\x36\x05\x00\x01a\x00\x01"))
check("qos2", violation_on_poll(b"\x34\x05\x00\x01a\x00\x01"))
check("dup_qos0", violation_on_poll(b"\x38\x03\x00\x01a"))
check("pubrel", violation_on_poll(b"\x62\x02\x00\x01"))
check("pingresp_flags", violation_on_poll(b"\xd1\x00"))
check("second_connack", violation_on_poll(CONNACK))

# anything but CONNACK first: here a PUBLISH the broker had no reason to send
early = ScriptedLink(first=mp.publish_packet("t", b"x") + CONNACK)
c = client(early)
check("before_connack", raises_oserror(c.connect) and early.closed and not c.connected)

present = ScriptedLink(first=b"\x20\x02\x01\x00")
c = client(present)
check("session_present", raises_oserror(c.connect) and c.violations == 1)


# a SUBACK granting more than was asked for
class GrantsQoS2(ScriptedLink):
    def send(self, mv):
        n = ScriptedLink.send(self, mv)
        if mv[0] & 0xF0 == mp.SUBSCRIBE:
            self.inbox = self.inbox[:-1] + b"\x02"
        return n


greedy = GrantsQoS2()
c = client(greedy)
c.connect()
check("suback_qos2", raises_oserror(lambda: c.subscribe("d", 1)) and greedy.closed)

# QoS 1 still works and is acknowledged after all that
link = ScriptedLink()
c = client(link)
c.connect()
link.inbox += mp.publish_packet("d", b"q1", 1, False, 5)
check("qos1_ok", c.poll(50) == ("d", b"q1") and link.packets[-1] == mp.puback_packet(5))

# a peer flooding PINGRESPs while a PUBACK is awaited: publish still gives up
flood = ScriptedLink(forever=b"\xd0\x00" * 8, pubacks=False)
c = client(flood, retries=1)
c.connect()
check("flood_pingresp", raises_oserror(lambda: c.publish("t", b"x")) and flood.closed)

# ... or flooding QoS 0 PUBLISHes (each one queued, the oldest dropped)
flood = ScriptedLink(forever=mp.publish_packet("n", b"noise"), pubacks=False)
c = client(flood, retries=1, max_queue=4)
c.connect()
check("flood_publish", raises_oserror(lambda: c.publish("t", b"x")) and c.dropped > 0)

# a poll under a flood returns messages, and a poll under a ping flood ends
flood = ScriptedLink(forever=b"\xd0\x00" * 8)
c = client(flood)
c.connect()
check("flood_poll", c.poll(30) is None and c.connected)

try:
    MQTTClient("c", user=None, password="secret")
    check("password_needs_user", False)
except ValueError:
    check("password_needs_user", True)
try:
    mo.connect_packet("c", 60, True, None, None, 1, False, None, "secret")
    check("connect_packet_refuses", False)
except ValueError:
    check("connect_packet_refuses", True)

# the receive buffer is sized once from max_packet and never replaced
link = ScriptedLink()
c = client(link, max_packet=1024 + 256)
c.connect()
buf = c._rbuf
big = bytes(range(256)) * 4
link.inbox += mp.publish_packet("edgeps/j/down/w", big, 1, False, 9)
got = c.poll(50)
check("rbuf_once", got == ("edgeps/j/down/w", big) and c._rbuf is buf)
check("rbuf_size", len(buf) == 1024 + 256 + 5)


class TrickleLink(ScriptedLink):
    """Takes one byte per send, 2 ms apart: a peer that reads ever so slowly."""

    def send(self, mv):
        if mv[0] == mp.CONNECT and len(self.packets) == 0:
            return ScriptedLink.send(self, mv)
        clock.sleep_ms(2)
        return 1


# 5 KB at 500 B/s would take 10 s: the 50 ms send deadline ends it
link = TrickleLink()
c = client(link)
c.connect()
check("trickle_send", raises_oserror(lambda: c.publish("t", bytes(5000), 0)))
