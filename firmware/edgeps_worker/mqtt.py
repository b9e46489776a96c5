"""A small MQTT 3.1.1 client for boards (MicroPython) and CPython workers.

One preallocated buffer per packet sent in one write (so Nagle and delayed
ACK never stall a QoS 1 round trip), TCP_NODELAY where the port has it,
packet ids 1..65535, PUBACK retries with DUP, keepalive pings from ``poll``,
optional TLS (``ssl_context``). Every wait ends at its deadline whatever the
peer sends. The client is strict: a packet MQTT 3.1.1 does not allow from a
broker (``mqtt_packets.check_header``: anything before CONNACK, QoS 2 or 3,
wrong flags) closes the link with OSError, counted in ``violations``; the
caller reconnects. The QoS 2 flow is not implemented (the worker subscribes
at QoS 1). A PUBLISH whose framing is sound but whose topic or packet id is
malformed is counted in ``dropped`` and skipped; one longer than
``max_packet`` is acked, drained off the socket a buffer at a time and handed
on as ``(topic, None)``, the link kept, unless its payload fits
``keep_over``: then it is read whole into a block of its own (a job's card
larger than a board's chunk). Packet building and parsing
are pure functions (``mqtt_packets``); the socket sits behind a small link
object. The caller owns reconnection (the worker loop rejoins its job).
"""

# the modules, not their names: each imported name would be one more slot
# in this module's globals, on the heap
from edgeps_worker import mqtt_link as _l
from edgeps_worker import mqtt_packets as _p
from edgeps_worker import unload


class MQTTClient:
    """MQTT 3.1.1 client implementing the worker transport interface.

    Parameters
    ----------
    user, password: a password needs a user [MQTT-3.1.2-22] (ValueError).
    timeout_ms: bound on one wait for CONNACK, SUBACK or PUBACK, on one send.
    retries: PUBLISH resends (with DUP) before the link is declared dead.
    max_packet: largest remaining length read; the receive buffer is
        allocated once for it, so it never grows at run time. A longer
        PUBLISH is discarded: ``poll`` gives ``(topic, None)`` for it.
    max_queue: incoming messages held while waiting for an ack; the oldest
        is dropped (and counted in ``dropped``) beyond it.
    ssl_context: an ``ssl.SSLContext`` (MicroPython or CPython) for TLS, with
        ``server_hostname`` the name the broker's certificate must carry.
    opener: ``opener(host, port, timeout_ms) -> link``; tests pass a fake.
    payload_views: ``poll`` returns a message that was not queued with its
        payload as a view into the receive buffer, valid only until the next
        call to the client (a board then needs no second chunk-sized block).
        A callable ``early(topic, view) -> bool`` instead also sees each
        message read while the client waits for an ack, as a view, and the
        queue keeps a copy only when it returns False.
    buffers: (send, receive) bytearrays a board allocated early, else the
        client allocates them; receive must hold ``max_packet + 5`` bytes.

    ``keep_over`` (an attribute a client may be given): a PUBLISH longer than
    max_packet whose payload is at most this many bytes is handed on whole,
    in a bytearray taken for it (dropped as above when the heap has none).
    """

    def __init__(
        self,
        client_id,
        server="127.0.0.1",
        port=1883,
        user=None,
        password=None,
        keepalive=60,
        timeout_ms=5000,
        retries=3,
        max_packet=16384,
        max_queue=64,
        ssl_context=None,
        server_hostname=None,
        opener=None,
        payload_views=False,
        buffers=None,
    ):
        if password is not None and user is None:
            raise ValueError("a password needs a username [MQTT-3.1.2-22]")
        if isinstance(client_id, str):
            client_id = client_id.encode()
        # read only by mqtt_open.connect: one attribute, not five (the
        # instance's table then fits 23 slots)
        self._login = (client_id, server, port, user, password)
        self.keepalive = keepalive
        self.timeout_ms = timeout_ms
        self.retries = retries
        self.max_packet = max_packet
        self.max_queue = max_queue
        self.payload_views = payload_views

        def tcp(host, port, timeout_ms):
            name = server_hostname or host
            return _l.SocketLink(host, port, timeout_ms, ssl_context, name)

        self._opener = opener or tcp
        self._link = None
        self._acked = False  # CONNACK received on this link
        # allocated once, early, for the largest packet (fixed header byte,
        # 4 length bytes, max_packet): no growth in a fragmented heap (only
        # a send buffer past 16 KB grows, for clients off the board)
        if buffers is None:
            buffers = bytearray(min(max_packet, 16384) + 5), bytearray(max_packet + 5)
        self._wbuf, self._rbuf = buffers
        if len(self._rbuf) < max_packet + 5:
            raise ValueError("receive buffer smaller than max_packet + 5")
        self._rmv = memoryview(self._rbuf)
        self._r0 = 0  # unread bytes are _rbuf[_r0:_r1]
        self._r1 = 0
        self._pid = 0
        self._queue = []
        self._last_send = 0
        self._ping_sent = None
        self._skip = 0  # bytes of an oversized PUBLISH still to discard
        self.dropped = 0
        self.resent = 0
        self.violations = 0

    @property
    def connected(self):
        """True while the link is up (as far as this client knows)."""
        return self._link is not None

    # -------------------------------------------------------------- session

    def connect(
        self, will_topic=None, will_payload=None, will_retain=False, clean=True
    ):
        """Open the link, send CONNECT (last will QoS 1), wait for CONNACK."""
        # mqtt_open.connect
        self._rare("connect", will_topic, will_payload, will_retain, clean)

    def subscribe(self, topic, qos=1):
        """Subscribe and wait for the SUBACK; OSError if refused or unanswered."""
        self._rare("subscribe", topic, qos)  # mqtt_open.subscribe

    def _rare(self, name, *args):
        # what runs per connect or per oversized message is in mqtt_open,
        # which a board unloads after each use; each call site names the
        # function it calls (mqtt_open.<name>), as a module import would
        from edgeps_worker import mqtt_open

        try:
            return getattr(mqtt_open, name)(self, *args)
        finally:
            unload("mqtt_open")

    def publish(self, topic, payload, qos=1, retain=False):
        """Send one message; for QoS 1 return only after its PUBACK."""
        if isinstance(payload, str):
            payload = payload.encode()
        self.publish_frame(topic, len(payload), None, payload, qos=qos, retain=retain)

    def publish_frame(self, topic, n, write, *args, qos=1, retain=False):
        """Like publish, but ``write(buf, off, *args)`` writes the n payload bytes
        straight into the send buffer (no payload object); None: args[0] is it."""
        if self._link is None:
            raise OSError(_l.ECONNRESET, "not connected")
        pid = self._next_pid() if qos else 0
        buf, i, total = _p.publish_head(self._wbuf, topic, n, qos, retain, pid)
        self._wbuf = buf
        if write is None:
            buf[i:total] = args[0]
        else:
            write(buf, i, *args)
        mv = memoryview(buf)[:total]
        self._send(mv)
        if not qos:
            return
        for attempt in range(self.retries + 1):
            if attempt:
                buf[0] |= 0x08  # DUP: the broker may have it already
                self.resent += 1
                self._send(mv)
            if (
                self._wait_for(_p.PUBACK, pid, _l.ticks_ms(), self.timeout_ms)
                is not None
            ):
                return
        self._dead("no PUBACK for packet %d" % pid)

    def poll(self, timeout_ms):
        """One incoming (topic, payload) or None after at most timeout_ms."""
        if self._queue:
            return self._queue.pop(0)
        if self._link is None:
            raise OSError(_l.ECONNRESET, "not connected")
        t0 = _l.ticks_ms()
        while True:
            ka = self.keepalive
            if ka:  # keepalive duty: PINGREQ when idle, a dead link when unanswered
                now = _l.ticks_ms()
                if self._ping_sent is not None:
                    if _l.ticks_diff(now, self._ping_sent) > max(
                        self.timeout_ms, ka * 1000
                    ):
                        self._dead("no PINGRESP")
                elif _l.ticks_diff(now, self._last_send) >= ka * 500:
                    self.ping()
            left = max(0, timeout_ms - _l.ticks_diff(_l.ticks_ms(), t0))
            # wake up in time for the next keepalive duty; a zero wait still
            # takes whatever the socket already holds
            step = min(left, max(1, self.keepalive * 500)) if self.keepalive else left
            self._wait_for(_p.PUBLISH, None, _l.ticks_ms(), step)
            if self._queue:
                return self._queue.pop(0)
            if left <= 0:
                return None

    def ping(self):
        """Send PINGREQ now (poll also does this when the link is idle)."""
        self._send(memoryview(_p.PINGREQ_BYTES))
        if self._ping_sent is None:
            self._ping_sent = _l.ticks_ms()

    def close(self):
        """Leave cleanly: DISCONNECT (so the last will is not sent), then close."""
        if self._link is not None:
            try:
                self._send(memoryview(_p.DISCONNECT_BYTES))
            except OSError:
                pass
        self.close_link()

    disconnect = close

    def close_link(self):
        """Drop the socket without DISCONNECT: the broker sends the last will."""
        link = self._link
        self._link = None
        if link is not None:
            try:
                link.close()
            except OSError:
                pass

    # -------------------------------------------------------------- internals

    def _next_pid(self):
        # 0 is not a valid packet id in MQTT 3.1.1
        self._pid = self._pid % 65535 + 1
        return self._pid

    def _dead(self, why):
        self.close_link()
        raise OSError(_l.ETIMEDOUT, why)

    def _violation(self, why):
        self.violations += 1
        self.close_link()
        raise OSError(_l.ECONNRESET, "protocol violation: " + why)

    def _send(self, mv):
        link = self._link
        if link is None:
            raise OSError(_l.ECONNRESET, "not connected")
        t0 = _l.ticks_ms()
        try:
            while len(mv):
                n = link.send(mv)
                if n:
                    mv = mv[n:]
                    if not len(mv):
                        break
                left = self.timeout_ms - _l.ticks_diff(_l.ticks_ms(), t0)
                # a peer taking a few bytes at a time must not stretch the wait
                if left <= 0 or not n and not link.wait(True, left):
                    raise OSError(_l.ETIMEDOUT, "send timed out")
        except OSError:
            self.close_link()
            raise
        self._last_send = _l.ticks_ms()

    def _fill(self, need, t0, timeout_ms):
        """Read until ``need`` bytes are buffered; False once the deadline passed.

        One read is made even at the deadline (a zero wait takes what the
        socket holds), none after it, however much the peer keeps sending.
        """
        link = self._link
        if link is None:
            raise OSError(_l.ECONNRESET, "not connected")
        while self._r1 - self._r0 < need:
            if len(self._rbuf) - self._r0 < need:
                # move the unread bytes to the front
                unread = self._rmv[self._r0 : self._r1]
                self._rbuf[: len(unread)] = unread
                self._r1 -= self._r0
                self._r0 = 0
            try:
                n = link.recv_into(self._rmv[self._r1 :])
            except OSError:
                self.close_link()
                raise
            if n:
                self._r1 += n
                if self._r1 - self._r0 >= need:
                    break
            left = timeout_ms - _l.ticks_diff(_l.ticks_ms(), t0)
            if left <= 0 or not n and not link.wait(False, left):
                return False
        return True

    def _read_packet(self, t0, timeout_ms):
        """(first byte, body memoryview) of the next packet, or None on timeout.

        A PUBLISH longer than max_packet comes as its topic and packet id
        only, with ``_skip`` set to the bytes still to discard.
        """
        if self._skip and not self._rare("drain", t0, timeout_ms):  # mqtt_open.drain
            return None
        if not self._fill(2, t0, timeout_ms):
            return None
        while True:
            try:
                hdr = _p.read_varint(self._rbuf, self._r0 + 1, self._r1)
            except ValueError:
                self._dead("bad remaining length")
            if hdr is not None:
                break
            if not self._fill(self._r1 - self._r0 + 1, t0, timeout_ms):
                return None
        rl, start = hdr
        why = _p.check_header(self._rbuf[self._r0], rl, self._acked)
        if why is not None:
            self._violation(why)
        # _fill may compact the buffer, moving the packet to index 0
        off = start - self._r0
        if rl > self.max_packet:  # a PUBLISH (check_header): its head, _skip set
            rl = self._rare("oversized", off, rl, t0, timeout_ms)  # mqtt_open.oversized
        if rl is None or not self._fill(off + rl, t0, timeout_ms):
            return None
        start = self._r0 + off
        first = self._rbuf[self._r0]
        # a view, valid until the next read: callers parse it at once, and a
        # PUBLISH copies only its payload
        body = self._rmv[start : start + rl]
        self._r0 = start + rl
        if self._r0 == self._r1:
            self._r0 = self._r1 = 0
        self._ping_sent = None  # any packet shows the link is alive
        return first, body

    def _wait_for(self, kind, pid, t0, timeout_ms):
        """Handle packets until one of ``kind`` (and ``pid``) arrives; its body.

        None once the deadline has passed, even while packets keep coming.
        """
        while True:
            got = self._read_packet(t0, timeout_ms)
            if got is None:
                return None
            first, body = got
            ptype = first & 0xF0
            if ptype == _p.PUBLISH:
                self._incoming(first, body, kind == _p.PUBLISH)
                if kind == _p.PUBLISH:
                    return body
            elif ptype == kind and (pid is None or _p.parse_u16(body, 0) == pid):
                return body
            # anything else check_header let through: late acks of earlier
            # retries, ping answers
            if _l.ticks_diff(_l.ticks_ms(), t0) >= timeout_ms:
                return None

    def _incoming(self, first, body, direct):
        # only a message poll hands out at once may stay a view of _rbuf, and
        # one read during an ack wait while payload_views is a callable, which
        # sees it first and keeps it out of the queue when it used it
        pv = self.payload_views
        early = None if direct or pv is True or not pv else pv
        view = early is not None or direct and pv and not self._queue
        msg = _p.parse_publish(first, body, not view)
        if msg is None:
            self.dropped += 1
            return
        topic, payload, qos, pid = msg
        if self._skip:  # oversized: acked and dropped, only its topic is handed
            # on, or read whole when it fits keep_over
            payload = None
            if hasattr(self, "keep_over"):
                from edgeps_worker import mqtt_whole

                payload = mqtt_whole.read(self)
                unload("mqtt_whole")
        if qos == 1:
            self._send(memoryview(_p.puback_packet(pid)))
        if early is not None and payload is not None:
            if early(topic, payload):
                return
            payload = bytes(payload)
        if len(self._queue) >= self.max_queue:
            self._queue.pop(0)
            self.dropped += 1
        self._queue.append((topic, payload))
