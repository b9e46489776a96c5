"""The dashboard under idle, half-sent and surplus connections, and off loopback."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from edgeps.observe.dashboard import Dashboard, Limits, check_options, is_loopback

LIMITS = Limits(timeout=0.5, deadline=2.0, connections=8)


def wait_until(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def closed_by_server(conn: socket.socket) -> bool:
    """True once the server closed ``conn`` (EOF or reset), without blocking."""
    conn.setblocking(False)
    try:
        return conn.recv(1 << 16) == b"" or closed_by_server(conn)
    except BlockingIOError:
        return False
    except OSError:
        return True


def half_sent(port: int, n: int) -> list[socket.socket]:
    """``n`` connections that send half a request line and stop."""
    out = []
    for _ in range(n):
        conn = socket.create_connection(("127.0.0.1", port), timeout=5)
        conn.sendall(b"GET /api/state HTTP/1.1\r\nHost: x\r\n")
        out.append(conn)
    return out


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def dashboard() -> Iterator[Dashboard]:
    dash = Dashboard("127.0.0.1:0", limits=LIMITS)
    try:
        yield dash
    finally:
        dash.close()


def test_half_sent_connections_are_closed_and_threads_return(
    dashboard: Dashboard,
) -> None:
    # Prepare
    base = threading.active_count()
    port = dashboard.address[1]

    # Execute: three times the connection limit, each holding half a request
    conns = half_sent(port, 3 * LIMITS.connections)
    peak = threading.active_count()
    try:
        all_closed = wait_until(
            lambda: all(closed_by_server(c) for c in conns), timeout=20
        )
        back = wait_until(lambda: threading.active_count() <= base, timeout=20)
    finally:
        for c in conns:
            c.close()

    # Assert
    assert all_closed, "idle connections still open"
    assert peak <= base + LIMITS.connections, (peak, base)
    assert back, (threading.active_count(), base)
    assert status_of(dashboard.url + "api/state") == 200


def test_a_trickling_request_is_cut_at_its_deadline(dashboard: Dashboard) -> None:
    # Prepare: one header byte every 0.2 s, inside the socket timeout each time
    conn = socket.create_connection(("127.0.0.1", dashboard.address[1]), timeout=5)
    conn.sendall(b"GET /api/state HTTP/1.1\r\nX-Slow: ")
    start = time.monotonic()
    cut = False
    try:
        # Execute
        while time.monotonic() - start < 20:
            try:
                conn.sendall(b"a")
            except OSError:
                cut = True
                break
            time.sleep(0.2)
            if closed_by_server(conn):
                cut = True
                break
            conn.setblocking(True)
    finally:
        conn.close()

    # Assert
    assert cut, "a request trickling bytes was never cut"


def test_connections_past_the_limit_get_503_until_slots_free(
    dashboard: Dashboard,
) -> None:
    conns = half_sent(dashboard.address[1], LIMITS.connections)
    try:
        time.sleep(0.1)  # the server has accepted them all
        busy = status_of(dashboard.url + "api/state")
        freed = wait_until(
            lambda: status_of(dashboard.url + "api/state") == 200, timeout=20
        )
    finally:
        for c in conns:
            c.close()

    assert busy == 503
    assert freed


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
        ("dash.lan", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_off_loopback_needs_a_token_file_before_anything_binds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Prepare: any bind would be recorded (and refused)
    binds: list[object] = []

    def no_bind(self: socketserver.TCPServer) -> None:
        binds.append(self.server_address)
        raise AssertionError("bound")

    monkeypatch.setattr(socketserver.TCPServer, "server_bind", no_bind)
    token = tmp_path / "token"
    token.write_text("s3cret\n")

    # Execute / Assert
    with pytest.raises(ValueError, match="not a loopback address"):
        check_options("0.0.0.0:8080", None, 0.0)
    with pytest.raises(ValueError, match="dashboard-token-file"):
        check_options("192.168.1.5:8080", None, 0.0)
    with pytest.raises(ValueError, match="not a loopback address"):
        Dashboard("0.0.0.0:0")
    check_options("0.0.0.0:8080", str(token), 0.0)
    check_options("8080", None, 0.0)
    assert binds == []


@pytest.mark.parametrize("linger", [float("inf"), float("nan"), -1.0, 1e12])
def test_linger_must_be_a_finite_number_of_seconds(linger: float) -> None:
    with pytest.raises(ValueError, match="--dashboard-linger"):
        check_options("8080", None, linger)
