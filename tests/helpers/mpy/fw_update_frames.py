"""A worker's UPDATE framed in place into the MQTT send buffer, under MicroPython.

The worker pushes one gradient (array('f'), so the wire aliases its memory
through uctypes) through the firmware MQTT client over a link that records
every packet and withholds the first PUBACK of the second chunk (a DUP
resend of a buffer framed in place). Prints each packet as hex, one a line.
"""

import sys
from array import array

from edgeps_worker import mqtt_packets as mp
from edgeps_worker.mqtt import MQTTClient
from edgeps_worker.worker import Worker


class RecordingLink:
    """Takes whole writes, answers CONNECT and QoS 1 PUBLISHes, records packets."""

    def __init__(self):
        self.inbox = bytearray()
        self.packets = []
        self.publishes = 0

    def send(self, mv):
        pkt = bytes(mv)
        self.packets.append(pkt)
        kind = pkt[0] & 0xF0
        if kind == mp.CONNECT:
            self.inbox += b"\x20\x02\x00\x00"
        elif kind == mp.PUBLISH:
            self.publishes += 1
            start = mp.read_varint(pkt, 1, len(pkt))[1]
            tl = pkt[start] << 8 | pkt[start + 1]
            if self.publishes != 2:  # the second chunk's first send: no PUBACK
                self.inbox += b"\x40\x02" + pkt[start + 2 + tl : start + 4 + tl]
        return len(pkt)

    def recv_into(self, mv):
        n = min(len(mv), len(self.inbox))
        if not n:
            return None
        mv[:n] = self.inbox[:n]
        self.inbox = self.inbox[n:]
        return n

    def wait(self, writable, timeout_ms):
        return writable or bool(self.inbox)

    def close(self):
        pass


class FixedTrainer:
    model = "mlp:64-32-10"

    def __init__(self, n):
        self.n_params = n
        self.params = array("f", bytes(4 * n))

    def params_buffer(self):
        return self.params


n, key = int(sys.argv[1]), sys.argv[2].encode() if len(sys.argv) > 2 else None
link = RecordingLink()
t = MQTTClient("c1", opener=lambda host, port, timeout: link, timeout_ms=1)
t.connect("w/t", b"bye")
w = Worker(t, FixedTrainer(n), "job", "w1", instance=1, max_chunk=1024, key=key)
w.session = 77
w.last_loss = 0.5
w._grad = array("f", [(i % 97) / 8.0 - 6.0 for i in range(n)])
w.unacked = (3, 4, 5, 0.25, 16, 1)
w._send_update()
for pkt in link.packets[1:]:
    print(bytes(pkt).hex())
