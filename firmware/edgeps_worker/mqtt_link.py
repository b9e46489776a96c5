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
                    raise OSError(ECONNRESET, "TLS: " + str(exc).strip()) from None
            s.setblocking(False)
        except BaseException:
            s.close()
            raise
        self.sock = s
        # MicroPython TLS sockets may lack send(); write() does the same
        self._send = getattr(s, "send", None) or s.write
        # CPython sockets have recv_into, MicroPython ones readinto
        reader = getattr(s, "recv_into", None) or getattr(s, "readinto", None)
        if reader is None:
            s.close()
            raise OSError(errno.EINVAL, "socket cannot read into a buffer")
        self._recv_into = reader
        self._poll = select.poll()
        self._poll.register(s, select.POLLIN)
        self._POLLIN = select.POLLIN
        self._POLLOUT = select.POLLOUT
        self._bad = select.POLLERR | select.POLLHUP

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
