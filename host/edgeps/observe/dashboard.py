"""`--dashboard HOST:PORT`: a live page, `/api/state` (JSON) and `/metrics`.

The standard library's ThreadingHTTPServer runs in a daemon thread and reads
a `LatestState` that the coordinator fills once per metrics snapshot, so the
training loop never waits on a browser. The page is one HTML file shipped in
the package (no CDN: a field laptop has no internet); it polls `/api/state`.
With `--dashboard-token-file`, every request must carry the token, as
``Authorization: Bearer TOKEN`` or ``?token=TOKEN``; others get 401. Off
loopback the token is required. Each connection's socket times out after
`REQUEST_TIMEOUT` seconds of silence and a request must be done within
`REQUEST_DEADLINE`; at most `MAX_CONNECTIONS` are served at once (the rest get
503), so idle or half-sent connections never pile up threads.
"""

from __future__ import annotations

import argparse
import contextlib
import hmac
import ipaddress
import logging
import math
import socket
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

from edgeps.observe.metrics import dumps
from edgeps.observe.state import LatestState

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
REQUEST_TIMEOUT = 5.0  # seconds a connection may stay silent
REQUEST_DEADLINE = 15.0  # seconds from waiting for a request to its answer
MAX_CONNECTIONS = 32  # served at once; more get 503 at once
LINGER_MAX = 366 * 86400.0  # seconds


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The dashboard flags of `edgeps serve` and `edgeps demo`."""
    s = argparse.SUPPRESS
    parser.add_argument(
        "--dashboard",
        metavar="[HOST:]PORT",
        default=s,
        help="serve a live dashboard, /api/state and /metrics (Prometheus) here; "
        f"HOST defaults to {DEFAULT_HOST}",
    )
    parser.add_argument(
        "--dashboard-token-file",
        metavar="FILE",
        default=s,
        help="the dashboard answers only requests that carry this file's token "
        "(Authorization: Bearer TOKEN, or ?token=TOKEN in the page's URL)",
    )
    parser.add_argument(
        "--dashboard-linger",
        metavar="SECONDS",
        type=float,
        default=s,
        help="keep the dashboard up this long after the job ends (Ctrl-C ends it)",
    )


def parse_address(text: str) -> tuple[str, int]:
    """ "127.0.0.1:8080", "0.0.0.0:80" or "8080" -> (host, port)."""
    host, sep, port_text = str(text).rpartition(":")
    if not sep:
        host = DEFAULT_HOST
    host = host.strip("[]") or DEFAULT_HOST
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--dashboard must be [HOST:]PORT, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--dashboard port must be in 0..65535, got {port}")
    return host, port


def read_token(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"--dashboard-token-file: no such file: {path}")
    token = p.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"--dashboard-token-file {path} is empty")
    return token


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses; any other name is not."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refuse_open(host: str, address: str) -> None:
    raise ValueError(
        f"--dashboard {address}: {host} is not a loopback address, and the "
        "dashboard shows the job to anyone who reaches it: give "
        "--dashboard-token-file (or listen on 127.0.0.1)"
    )


def check_options(address: str | None, token_file: str | None, linger: float) -> None:
    """Fail at start-up, not after the job is built (called by the config check)."""
    if address is not None:
        host, _ = parse_address(address)
        if token_file is None and not is_loopback(host):
            _refuse_open(host, address)
    if token_file is not None:
        read_token(token_file)
    if not (math.isfinite(linger) and 0 <= linger <= LINGER_MAX):
        raise ValueError(
            f"--dashboard-linger must be a number of seconds in [0, "
            f"{LINGER_MAX:.0f}], got {linger!r}"
        )


def _page() -> bytes:
    return (
        resources.files("edgeps.observe").joinpath("static/dashboard.html").read_bytes()
    )


@dataclass(frozen=True)
class Limits:
    """How long a connection may stay silent, how long one request may take
    (seconds), and how many connections are served at once."""

    timeout: float = REQUEST_TIMEOUT
    deadline: float = REQUEST_DEADLINE
    connections: int = MAX_CONNECTIONS


class _Handler(BaseHTTPRequestHandler):
    """Routes: / (the page), /api/state, /metrics; all behind the token if set."""

    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout)
        self.server.watch(self.connection)

    def handle_one_request(self) -> None:
        self.server.watch(self.connection)  # the deadline runs per request
        super().handle_one_request()

    def finish(self) -> None:
        self.server.unwatch(self.connection)
        with contextlib.suppress(OSError):  # the peer left, or the deadline hit
            super().finish()

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        url = urlsplit(self.path)
        if not self._authorized(url.query):
            self._send(
                HTTPStatus.UNAUTHORIZED,
                b"token required\n",
                "text/plain",
                {"WWW-Authenticate": 'Bearer realm="edgeps"'},
            )
            return
        srv = self.server
        if url.path in ("/", "/index.html"):
            self._send(HTTPStatus.OK, srv.page, "text/html; charset=utf-8")
        elif url.path == "/api/state":
            body = dumps(srv.state.view()).encode()
            self._send(HTTPStatus.OK, body, "application/json")
        elif url.path == "/metrics":
            body, ctype = srv.exporter.render()
            self._send(HTTPStatus.OK, body, ctype)
        else:
            self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain")

    def _authorized(self, query: str) -> bool:
        token = self.server.token
        if token is None:
            return True
        header = self.headers.get("Authorization", "")
        given = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not given:
            given = (parse_qs(query).get("token") or [""])[0]
        return hmac.compare_digest(given.encode(), token.encode())

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        ctype: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the browser went away mid-answer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        log.debug("dashboard %s: " + format, self.address_string(), *args)


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most `MAX_CONNECTIONS`, each one on a deadline."""

    daemon_threads = True
    request_queue_size = MAX_CONNECTIONS

    def __init__(
        self,
        address: tuple[str, int],
        state: LatestState,
        token: str | None,
        limits: Limits,
    ) -> None:
        from edgeps.observe.prometheus import Exporter

        super().__init__(address, _Handler)
        self.state = state
        self.token = token
        self.page = _page()
        self.exporter = Exporter(state)
        self.request_timeout = limits.timeout
        self.request_deadline = limits.deadline
        self._slots = threading.BoundedSemaphore(limits.connections)
        self._lock = threading.Lock()
        self._since: dict[socket.socket, float] = {}

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._turn_away(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()  # no thread took the slot
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _turn_away(self, request: socket.socket) -> None:
        """503 without a thread; a send that would block is dropped."""
        try:
            request.setblocking(False)
            request.send(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                b"Retry-After: 1\r\nConnection: close\r\n\r\n"
            )
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that broke off is no news: logged, not printed."""
        log.debug("dashboard: connection %s failed", client_address, exc_info=True)

    def watch(self, conn: socket.socket) -> None:
        with self._lock:
            self._since[conn] = time.monotonic()

    def unwatch(self, conn: socket.socket) -> None:
        with self._lock:
            self._since.pop(conn, None)

    def service_actions(self) -> None:
        """Shut the sockets of requests past their deadline (each poll)."""
        now = time.monotonic()
        with self._lock:
            late = [
                c for c, t in self._since.items() if now - t > self.request_deadline
            ]
            for conn in late:
                del self._since[conn]
        for conn in late:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)  # the handler's recv returns


class Dashboard:
    """An HTTP server in a daemon thread over a `LatestState`; `close()` stops it."""

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        state: LatestState | None = None,
        limits: Limits = Limits(),
    ) -> None:
        host, port = parse_address(address)
        if token is None and not is_loopback(host):
            _refuse_open(host, address)  # before anything binds
        self.state = state if state is not None else LatestState()
        try:
            self._httpd = _Server((host, port), self.state, token, limits)
        except OSError as exc:  # port taken, address not on this machine, ...
            raise RuntimeError(f"--dashboard {address}: cannot listen: {exc}") from exc
        self.token = token
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="edgeps-dashboard",
            daemon=True,
        )
        self._thread.start()

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/"

    def publish(self, record: dict[str, Any]) -> None:
        self.state.publish(record)

    def linger(self, seconds: float, stop: threading.Event, out: IO[str]) -> None:
        """Keep serving the final state for ``seconds`` or until ``stop`` is set."""
        self.state.finish()
        if seconds <= 0 or stop.is_set():
            return
        print(
            f"edgeps: the job is over; the dashboard stays at {self.url} for "
            f"{seconds:g} s (Ctrl-C ends it)",
            file=out,
            flush=True,
        )
        stop.wait(min(seconds, threading.TIMEOUT_MAX))

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)


def open_dashboard(
    address: str | None, token_file: str | None, out: IO[str]
) -> Dashboard | None:
    """The dashboard asked for (None without ``--dashboard``); prints its URL."""
    if address is None:
        return None
    token = read_token(token_file) if token_file else None
    dash = Dashboard(address, token=token)
    note = " (token required: add ?token=...)" if token else ""
    print(f"edgeps: dashboard at {dash.url}{note}", file=out, flush=True)
    return dash
