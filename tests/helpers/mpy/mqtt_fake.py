"""Firmware MQTT client over a scripted link, under MicroPython.

Checks exact bytes with one-byte reads and writes, DUP resends, packet id
wrap-around and acks of incoming QoS 1 messages. Prints 'ok NAME' per check.
"""

from edgeps_worker import mqtt_packets as mp
from edgeps_worker.mqtt import MQTTClient


class OneByteLink:
    """Accepts and returns one byte per call; answers CONNECT and PUBLISH."""

    def __init__(self, drop_pubacks):
        self.inbox = bytearray()
        self.sent = bytearray()
        self.drop_pubacks = drop_pubacks
        self.publishes = []
        self.packets = []

    def send(self, mv):
        self.sent += bytes(mv[:1])
        self._answer()
        return 1

    def recv_into(self, mv):
        if not self.inbox:
            return None
        mv[0] = self.inbox[0]
        self.inbox = self.inbox[1:]
        return 1

    def wait(self, writable, timeout_ms):
        return writable or bool(self.inbox)

    def close(self):
        pass

    def _answer(self):
        hdr = mp.read_varint(self.sent, 1, len(self.sent))
        if hdr is None or hdr[0] + hdr[1] > len(self.sent):
            return
        pkt = bytes(self.sent[: hdr[0] + hdr[1]])
        self.sent = bytearray()
        self.packets.append(pkt)
        if pkt[0] == mp.CONNECT:
            self.inbox += b"\x20\x02\x00\x00"
        elif pkt[0] & 0xF0 == mp.PUBLISH:
            self.publishes.append(pkt)
            if self.drop_pubacks:
                self.drop_pubacks -= 1
            else:
                self.inbox += b"\x40\x02" + pkt[-2 - 3 : -3]  # pid precedes b"abc"


link = OneByteLink(drop_pubacks=1)
# 50 ms: long enough for a byte-at-a-time packet on a loaded box, short
# enough that the dropped PUBACK is waited out quickly
c = MQTTClient("mp", opener=lambda h, p, t: link, timeout_ms=50)
c.connect("w", b"bye")
c._pid = 65535
c.publish("t", b"abc", 1)
want = mp.publish_packet("t", b"abc", 1, False, 1)
dup = mp.publish_packet("t", b"abc", 1, False, 1, True)
print("ok wrap" if link.publishes[0] == want else "FAIL wrap")
print("ok dup" if link.publishes == [want, dup] else "FAIL dup")
big = b"\x05" * 300
link.inbox += mp.publish_packet("d", big, 1, False, 77)
got = c.poll(1000)  # returns as soon as the message is whole
print("ok incoming" if got == ("d", big) else "FAIL incoming")
print("ok puback" if link.packets[-1] == mp.puback_packet(77) else "FAIL puback")
