"""The dashboard of a running `edgeps demo`, opened in a real headless chromium.

chromium's ``--dump-dom`` with a virtual-time budget runs the page's script
(its polls of /api/state included) and prints the DOM it built; the rows it
shows are checked against /api/state, read right after.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from edgeps.workloads.scenarios import make_scenario

from tests.conftest import free_port

TOKEN = "t0ken-for-the-test"


def chromium_path() -> str | None:
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None
    )


def chromium_dump(url: str, budget_ms: int = 3000, timeout: float = 90) -> str:
    """The DOM of ``url`` after ``budget_ms`` of virtual time in headless chromium."""
    exe = chromium_path()
    if exe is None:
        pytest.fail("chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="edgeps-chromium-") as profile:
        cmd = [
            exe,
            "--headless",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            url,
        ]
        if os.geteuid() == 0:
            cmd.insert(2, "--no-sandbox")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Rows(HTMLParser):
    """Worker rows (data-* attributes, cell texts) and elements with an id."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.ids: dict[str, str] = {}
        self.body: dict[str, str] = {}
        self._row: dict[str, str] | None = None
        self._cell: str | None = None
        self._id: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "body":
            self.body = a
        if tag == "tr" and "data-worker" in a:
            # data-* attributes as "@name", cell texts by the cell's class
            self._row = {"@" + k[5:]: v for k, v in a.items() if k.startswith("data-")}
            self.rows[a["data-worker"]] = self._row
        elif tag == "td" and self._row is not None:
            self._cell = a.get("class", "")
            self._row.setdefault(self._cell, "")
        if "id" in a:
            self._id = a["id"]
            self.ids[self._id] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._cell = None
        elif tag == "tr":
            self._row = None
        self._id = None

    def handle_data(self, data: str) -> None:
        if self._row is not None and self._cell is not None:
            self._row[self._cell] += data
        if self._id is not None:
            self.ids[self._id] += data


def get_state(base: str, token: str | None = TOKEN) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(base + "api/state")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}
    except OSError:
        return 0, {}


def wait_for(base: str, ready: Any, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    state: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status, state = get_state(base)
        if status == 200 and ready(state):
            return state
        time.sleep(0.2)
    pytest.fail(f"the dashboard never showed what we waited for; last: {state}")


@pytest.mark.integration
def test_the_page_shows_the_demo_boards_as_the_api_does(
    mosquitto: Any, tmp_path: Path
) -> None:
    # Prepare: the demo (8 sensors, 2 stragglers) with a dashboard behind a token
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    stragglers = {
        w
        for w, p in make_scenario("stragglers", 8, 0).profiles.items()
        if p.straggler_factor > 1
    }
    demo = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "edgeps",
            "demo",
            "--quiet",
            "--broker",
            mosquitto.url,
            "--dashboard",
            f"127.0.0.1:{port}",
            "--dashboard-token-file",
            str(token_file),
            "--dashboard-linger",
            "60",
            "--target-accuracy",
            "0.99",
            "--max-time",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            base,
            lambda s: (
                len(s.get("workers", {})) == 8
                and {w for w, r in s["workers"].items() if r["class"] == "persistent"}
                == stragglers
            ),
            60,
        )
        assert get_state(base, token=None)[0] == 401

        # Execute: the page as a browser renders it, between two API reads. A
        # live run moves on while the browser starts, and on a loaded box a
        # board may be transient for a moment the API reads around it miss:
        # render again (at most 3 times) until every class the page shows is
        # one the API showed.
        for _attempt in range(3):
            _, before = get_state(base)
            dom = chromium_dump(base + f"?token={TOKEN}")
            _, api = get_state(base)
            page = Rows()
            page.feed(dom)
            if all(
                r["class"]
                in (snap["workers"].get(w, {}).get("class") for snap in (before, api))
                for w, r in page.rows.items()
            ):
                break

        # Assert: the same boards, states and classes; counters only grow
        assert sorted(page.rows) == sorted(api["workers"]) and len(page.rows) == 8
        for wid, row in page.rows.items():
            w = api["workers"][wid]
            assert row["state"] == row["@state"] == w["state"] == "live"
            assert row["class"] == row["@class"]
            assert row["class"] in (w["class"], before["workers"][wid]["class"])
            # a loaded machine can make any board spike (transient) for a moment;
            # only the stragglers are slow for good
            assert (w["class"] == "persistent") == (wid in stragglers)
            assert 0 < int(row["clock"]) <= w["clock"]
            assert 0 < int(row["accepted"]) <= w["accepted"]
            assert row["timing"].endswith("ms")
        assert page.ids["policy"] == api["policy"]
        assert page.ids["bound"] == "bound: " + api["bound"]
        m = api["model"]
        assert page.ids["model"] == (
            f"model {m['spec']}: {m['architecture']}; {m['params']:,} params, "
            f"{m['macs']:,} MACs/sample"
        )
        assert 0 < int(page.body["data-version"]) <= api["version"]
        assert page.ids["status"].startswith("8 workers")
    finally:
        # SIGTERM, which the demo turns into Ctrl-C: a test run started in the
        # background of a script inherits SIGINT ignored, and so would the demo
        demo.send_signal(signal.SIGTERM)
        try:
            out, err = demo.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            demo.kill()
            out, err = demo.communicate(timeout=10)
    assert demo.returncode == 0, err[-2000:]
    assert "w07" in out  # the summary table
    assert f"dashboard at http://127.0.0.1:{port}/ (token required" in err
