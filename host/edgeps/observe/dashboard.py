"""`--dashboard HOST:PORT`: a live page, `/api/state` (JSON) and `/metrics`.

The standard library's ThreadingHTTPServer runs in a daemon thread and reads
a `LatestState` that the coordinator fills once per metrics snapshot, so the
training loop never waits on a browser. The page is one HTML file shipped in
the package (no CDN: a field laptop has no internet); it polls `/api/state`.
With `--dashboard-token-file`, every request must carry the token, as
``Authorization: Bearer TOKEN`` or ``?token=TOKEN``; others get 401.
"""

from __future__ import annotations

import argparse
import hmac
import logging
import threading
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


def check_options(address: str | None, token_file: str | None, linger: float) -> None:
    """Fail at start-up, not after the job is built (called by the config check)."""
    if address is not None:
        parse_address(address)
    if token_file is not None:
        read_token(token_file)
    if not linger >= 0:
        raise ValueError(f"--dashboard-linger must be >= 0, got {linger!r}")


def _page() -> bytes:
    return (
        resources.files("edgeps.observe").joinpath("static/dashboard.html").read_bytes()
    )


class _Handler(BaseHTTPRequestHandler):
    """Routes: / (the page), /api/state, /metrics; all behind the token if set."""

    server: _Server
    protocol_version = "HTTP/1.1"

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
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], state: LatestState, token: str | None
    ) -> None:
        from edgeps.observe.prometheus import Exporter

        super().__init__(address, _Handler)
        self.state = state
        self.token = token
        self.page = _page()
        self.exporter = Exporter(state)


class Dashboard:
    """An HTTP server in a daemon thread over a `LatestState`; `close()` stops it."""

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        state: LatestState | None = None,
    ) -> None:
        host, port = parse_address(address)
        self.state = state if state is not None else LatestState()
        try:
            self._httpd = _Server((host, port), self.state, token)
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
        if seconds <= 0 or stop.is_set():
            return
        print(
            f"edgeps: the job is over; the dashboard stays at {self.url} for "
            f"{seconds:g} s (Ctrl-C ends it)",
            file=out,
            flush=True,
        )
        stop.wait(seconds)

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
