"""Red team, the live dashboard: half-sent requests never pile up threads, it
will not listen off loopback without a token, and its auth, paths, header limits
and escaping hold."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path

import pytest
from edgeps.observe.dashboard import MAX_CONNECTIONS, Dashboard

from tests.conftest import Broker, free_port
from tests.redteam._held import held, refused_cleanly, serve

TOKEN = "s3cret-" + "0123456789abcdef"


def wait_until(cond: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def threads_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no thread count")


def closed_by_server(conn: socket.socket) -> bool:
    conn.setblocking(False)
    try:
        while conn.recv(1 << 16):
            pass
        return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def raw(port: int, request: bytes) -> tuple[str, bytes]:
    """The status line and whole answer of one raw request."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(request)
        data = b""
        try:
            while chunk := conn.recv(1 << 16):
                data += chunk
        except OSError:
            pass
    return data.split(b"\r\n", 1)[0].decode(errors="replace"), data


def get(port: int, path: str, auth: str = "") -> str:
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    return raw(port, head.encode())[0]


def probe(port: int) -> str:
    try:
        return get(port, "/api/state")
    except OSError:
        return "not listening"


@pytest.mark.integration
@pytest.mark.slow
def test_half_sent_requests_do_not_hold_threads(
    mosquitto: Broker, tmp_path: Path
) -> None:
    # Prepare: a job with a dashboard behind a token, and no workers
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edgeps",
            "serve",
            "--broker",
            mosquitto.url,
            "--job",
            "lab",
            "--quiet",
            "--max-time",
            "90",
            "--dashboard",
            f"127.0.0.1:{port}",
            "--dashboard-token-file",
            str(token),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    conns: list[socket.socket] = []
    try:
        up = wait_until(lambda: probe(port).endswith("401 Unauthorized"), 60)
        held(up, "dashboard came up")
        time.sleep(1.0)
        base = threads_of(proc.pid)

        # Execute: 200 connections, each sending half a request and then nothing
        for _ in range(200):
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                conn.sendall(b"GET /api/state HTTP/1.1\r\nHost: x\r\n")
                conns.append(conn)
            except OSError:
                break
        during = 0
        for _ in range(10):
            during = max(during, threads_of(proc.pid))
            time.sleep(0.1)
        all_closed = wait_until(lambda: all(closed_by_server(c) for c in conns), 60)
        after = wait_until(lambda: threads_of(proc.pid) <= base, 30)
        auth = f"Authorization: Bearer {TOKEN}\r\n"
        answered = get(port, "/api/state", auth)

        # Assert
        held(len(conns) == 200, "200 half-sent connections opened", len(conns))
        held(
            during <= base + MAX_CONNECTIONS,
            "half-sent requests: threads bounded",
            (base, during),
        )
        held(all_closed, "half-sent requests: every connection closed")
        held(after, "half-sent requests: threads back to base", threads_of(proc.pid))
        held(answered.endswith("200 OK"), "dashboard answers after", answered)
    finally:
        for c in conns:
            c.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def test_dashboard_off_loopback_needs_a_token() -> None:
    # 0.0.0.0 is only named: the check runs before anything binds
    done = serve("--dashboard", f"0.0.0.0:{free_port()}")

    line = refused_cleanly(done, "dashboard off loopback", "--dashboard")
    held("not a loopback address" in line, "dashboard off loopback: says why", line)


@pytest.fixture
def guarded() -> Iterator[int]:
    """A dashboard on loopback behind ``TOKEN``; its port."""
    dash = Dashboard("127.0.0.1:0", token=TOKEN)
    try:
        yield dash.address[1]
    finally:
        dash.close()


def test_dashboard_auth(guarded: int) -> None:
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    for path in ("/", "/api/state", "/metrics"):
        held(get(guarded, path).endswith("401 Unauthorized"), f"auth: {path}")
    for header in (
        "Authorization: Bearer nope\r\n",
        f"Authorization: Bearer {TOKEN[:-1]}\r\n",
        f"Authorization: Basic {TOKEN}\r\n",
    ):
        held(get(guarded, "/api/state", header).endswith("401 Unauthorized"), header)
    held(get(guarded, "/api/state?token=x").endswith("401 Unauthorized"), "?token=x")
    held(get(guarded, "/api/state", auth).endswith("200 OK"), "auth: right bearer")
    held(get(guarded, f"/api/state?token={TOKEN}").endswith("200 OK"), "?token=")


@pytest.mark.parametrize(
    "path",
    [
        "/../../../../etc/passwd",
        "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        "/static/../dashboard.py",
        "/static/dashboard.html",
        "//etc/passwd",
        "/..%2f..%2fetc%2fpasswd",
        "/api/state/../../etc/passwd",
    ],
)
def test_dashboard_path_traversal(guarded: int, path: str) -> None:
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    head = f"GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    status, body = raw(guarded, head.encode())

    held(status.endswith("404 Not Found"), f"traversal {path}", status)
    held(b"root:" not in body and b"import" not in body, f"traversal {path}: no leak")
    held(get(guarded, path).endswith("401 Unauthorized"), f"traversal {path}: 401")


def test_dashboard_oversized_requests(guarded: int) -> None:
    huge_header = b"GET /api/state HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 100_000
    many = b"".join(b"X-%d: y\r\n" % i for i in range(200))
    cases = {
        "100 KB header": huge_header + b"\r\n\r\n",
        "200 headers": b"GET /api/state HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n",
        "70 KB URL": b"GET /" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    }
    for name, request in cases.items():
        status = raw(guarded, request)[0]
        held(re.search(r" (400|414|431) ", status + " ") is not None, name, status)


def test_dashboard_page_escapes_every_string() -> None:
    page = (
        resources.files("edgeps.observe")
        .joinpath("static/dashboard.html")
        .read_text(encoding="utf-8")
    )
    sinks = ("innerHTML", "outerHTML", "document.write", "insertAdjacentHTML")

    held(not [s for s in sinks if s in page], "page: no HTML sinks")
    held("textContent" in page, "page: strings go through textContent")


def test_worker_data_files_refuse_bad_csvs(tmp_path: Path) -> None:
    from edgeps.pyworker.localdata import load_csv

    good = [",".join(["0.5"] * 4 + ["1"]) for _ in range(8)]
    cases = {
        "nan": good[:3] + ["nan,0,0,0,1"] + good[3:],
        "inf": good[:3] + ["0,inf,0,0,1"] + good[3:],
        "ragged": good[:3] + ["0,0,1"] + good[3:],
    }
    for name, lines in cases.items():
        path = tmp_path / f"{name}.csv"
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ValueError) as info:
            load_csv(path)
        held(str(path) in str(info.value), f"CSV {name}", info.value)
    binary = tmp_path / "binary.csv"
    binary.write_bytes(os.urandom(4000))
    with pytest.raises(ValueError) as info:
        load_csv(binary)
    held(str(binary) in str(info.value), "CSV binary", info.value)
