"""Socket side of the MQTT client: a non-blocking TCP (or TLS) link, bounded waits."""

import errno
import time

try:
    from time import sleep_ms, ticks_diff, ticks_ms  # type: ignore[attr-defined]
except ImportError:

    def ticks_ms():
        """Milliseconds from an arbitrary origin."""
        # CPython only; the board stubs rightly lack time.monotonic
        return int(time.monotonic() * 1000)  # pyright: ignore[reportAttributeAccessIssue]

    def ticks_diff(a, b):
        """a - b in milliseconds."""
        return a - b

    def sleep_ms(ms):
        """Sleep ms milliseconds."""
        time.sleep(ms / 1000)


EAGAIN = (errno.EAGAIN, getattr(errno, "EWOULDBLOCK", errno.EAGAIN))
ETIMEDOUT = errno.ETIMEDOUT
ECONNRESET = errno.ECONNRESET


def _want_more(e):
    """True for 'try again later' from a plain or a TLS socket (CPython's ssl)."""
    if e.args and e.args[0] in EAGAIN:
        return True
    return type(e).__name__ in ("SSLWantReadError", "SSLWantWriteError")


class SocketLink:
    """A non-blocking TCP socket with bounded waits (select.poll).

    With ``ssl_context`` the TCP connection is wrapped in TLS (handshake
    bounded by timeout_ms) and the certificate must name ``server_hostname``;
    a failed handshake or check is an OSError like any other failed connect.
    """

    def __init__(self, host, port, timeout_ms, ssl_context=None, server_hostname=None):
        # opening runs once per connect: its code lives in mqtt_open
        from edgeps_worker import mqtt_open

        (self.sock, self._send, self._recv_into, self._poll, self._POLLIN,
         self._POLLOUT, self._bad) = mqtt_open.open_link(
            host, port, timeout_ms, ssl_context, server_hostname)  # fmt: skip

    def send(self, mv):
        """Bytes written (maybe fewer than asked), or 0 if the socket is full."""
        try:
            n = self._send(mv)
        except OSError as e:
            if _want_more(e):
                return 0
            raise
        return n or 0

    def recv_into(self, mv):
        """Bytes read, None if nothing is there yet; raises OSError at EOF."""
        try:
            n = self._recv_into(mv)
        except OSError as e:
            if _want_more(e):
                return None
            raise
        if n == 0:
            raise OSError(ECONNRESET, "connection closed by broker")
        return n

    def wait(self, writable, timeout_ms):
        """True if the socket became readable (or writable) within timeout_ms."""
        self._poll.modify(self.sock, self._POLLOUT if writable else self._POLLIN)
        want = self._POLLOUT if writable else self._POLLIN | self._bad
        # MicroPython may append fields to each (obj, event) entry
        for entry in self._poll.poll(max(0, timeout_ms)):
            if entry[1] & want:
                return True
        return False

    def close(self):
        try:
            self._poll.unregister(self.sock)
        except Exception:
            pass
        self.sock.close()
