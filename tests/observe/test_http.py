"""The dashboard's HTTP server: page, /api/state, Prometheus /metrics, token."""

from __future__ import annotations

import io
import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from edgeps.observe.dashboard import Dashboard, check_options, parse_address
from edgeps.observe.prometheus import staleness_histogram
from prometheus_client.parser import text_string_to_metric_families

RECORD = {
    "job": "lab",
    "policy": "dsp:w=2",
    "bound": "max P - min P <= 11",
    "elapsed": 12.5,
    "version": 300,
    "accuracy": 0.91,
    "updates": 300,
    "updates_per_s": 25.0,
    "max_staleness": 9,
    "inbox_depth": 3,
    "dropped": {"malformed": 2},
    "staleness_counts": {"0": 100, "3": 150, "9": 50},
    "workers": {
        "w00": {
            "clock": 120,
            "staleness": 0,
            "state": "live",
            "class": "normal",
            "waiting": False,
            "accepted": 200,
            "rejected": 1,
            "rejected_by_reason": {"duplicate": 1},
            "compute_s": 0.1,
            "comm_s": 0.01,
        },
        "w01": {
            "clock": 30,
            "staleness": 90,
            "state": "live",
            "class": "persistent",
            "waiting": True,
            "accepted": 100,
            "rejected": 0,
            "rejected_by_reason": {},
            "compute_s": 0.4,
            "comm_s": 0.01,
        },
        "w02": {
            "clock": 5,
            "staleness": 0,
            "state": "dead",
            "class": "-",
            "waiting": False,
            "accepted": 0,
            "rejected": 0,
            "rejected_by_reason": {},
            "compute_s": None,
            "comm_s": None,
        },
    },
}


def get(url: str, token: str | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers["Content-Type"], r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


@pytest.fixture
def dashboard() -> Iterator[Dashboard]:
    dash = Dashboard("127.0.0.1:0")
    try:
        yield dash
    finally:
        dash.close()


def test_state_and_page_are_served(dashboard: Dashboard) -> None:
    # Before the first snapshot: not ready, no workers, no metrics samples
    status, _, body = get(dashboard.url + "api/state")
    assert status == 200 and json.loads(body)["ready"] is False
    assert get(dashboard.url + "metrics")[2] == b""

    dashboard.publish(RECORD)

    status, ctype, body = get(dashboard.url + "api/state")
    state = json.loads(body)
    assert status == 200 and ctype == "application/json"
    assert state["ready"] and state["workers"] == RECORD["workers"]
    assert state["history"] == [
        {"elapsed": 12.5, "accuracy": 0.91, "updates_per_s": 25.0}
    ]
    status, ctype, page = get(dashboard.url)
    assert status == 200 and ctype.startswith("text/html")
    assert b"api/state" in page and b"<script" in page
    # no CDN, no internet: the only URL in the page is the SVG namespace
    assert re.findall(rb"https?://[^\s\"']+", page) == [b"http://www.w3.org/2000/svg"]
    assert get(dashboard.url + "nothing")[0] == 404


def test_metrics_parse_with_the_prometheus_parser(dashboard: Dashboard) -> None:
    dashboard.publish(RECORD)

    status, ctype, body = get(dashboard.url + "metrics")

    assert status == 200 and ctype.startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    assert families["edgeps_updates_applied"].type == "counter"
    assert samples[("edgeps_updates_applied_total", (("worker", "w00"),))] == 200
    key = (
        "edgeps_updates_rejected_total",
        (("reason", "duplicate"), ("worker", "w00")),
    )
    assert samples[key] == 1
    assert samples[("edgeps_messages_dropped_total", (("reason", "malformed"),))] == 2
    assert samples[("edgeps_worker_staleness_clocks", (("worker", "w01"),))] == 90
    assert samples[("edgeps_worker_waiting", (("worker", "w01"),))] == 1
    assert samples[("edgeps_workers", (("state", "live"),))] == 2
    assert samples[("edgeps_workers", (("state", "dead"),))] == 1
    assert samples[("edgeps_workers_by_class", (("class", "persistent"),))] == 1
    assert samples[("edgeps_accuracy", ())] == 0.91
    assert samples[("edgeps_inbox_depth", ())] == 3
    phase = (("phase", "compute"), ("worker", "w01"))
    assert samples[("edgeps_worker_iteration_seconds", phase)] == 0.4
    assert families["edgeps_update_staleness"].type == "histogram"
    assert samples[("edgeps_update_staleness_bucket", (("le", "2.0"),))] == 100
    assert samples[("edgeps_update_staleness_bucket", (("le", "+Inf"),))] == 300
    assert samples[("edgeps_update_staleness_count", ())] == 300
    assert samples[("edgeps_update_staleness_sum", ())] == 3 * 150 + 9 * 50
    info = (("bound", RECORD["bound"]), ("job", "lab"), ("policy", "dsp:w=2"))
    assert samples[("edgeps_job_info", info)] == 1


def test_without_the_token_every_route_is_401(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    check_options("127.0.0.1:0", str(token_file), 0.0)
    dash = Dashboard("127.0.0.1:0", token="s3cret-token")
    try:
        dash.publish(RECORD)
        for route in ("", "api/state", "metrics", "nothing"):
            assert get(dash.url + route)[0] == 401
            assert get(dash.url + route, token="wrong")[0] == 401
        assert get(dash.url + "api/state", token="s3cret-token")[0] == 200
        assert get(dash.url + "metrics?token=s3cret-token")[0] == 200
    finally:
        dash.close()


def test_staleness_buckets_are_cumulative() -> None:
    buckets, total = staleness_histogram({"0": 1, "5": 2, "300": 1})

    assert dict(buckets)["0.0"] == 1 and dict(buckets)["4.0"] == 1
    assert dict(buckets)["8.0"] == 3 and dict(buckets)["256.0"] == 3
    assert buckets[-1] == ("+Inf", 4) and total == 310


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("8080", ("127.0.0.1", 8080)),
        ("0.0.0.0:80", ("0.0.0.0", 80)),
        ("[::1]:9", ("::1", 9)),
    ],
)
def test_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["host:port", "127.0.0.1:70000", ""])
def test_bad_addresses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_address(text)


def test_bad_options_fail_at_start(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        check_options(None, str(empty), 0.0)
    with pytest.raises(FileNotFoundError):
        check_options(None, str(tmp_path / "missing"), 0.0)
    with pytest.raises(ValueError, match="linger"):
        check_options("8080", None, -1.0)


def test_linger_ends_when_the_job_is_stopped() -> None:
    # Prepare: a dashboard lingering for ten minutes after its job
    dash = Dashboard("127.0.0.1:0")
    stop = threading.Event()
    out = io.StringIO()
    waiter = threading.Thread(target=dash.linger, args=(600.0, stop, out))
    try:
        waiter.start()

        # Execute: Ctrl-C (the job's stop event)
        stop.set()
        waiter.join(30)

        # Assert
        assert not waiter.is_alive()
        assert f"stays at {dash.url} for 600 s" in out.getvalue()
    finally:
        stop.set()
        dash.close()


def test_dashboard_keys_in_a_config_file_and_flags(tmp_path: Path) -> None:
    from edgeps.runtime.config import merge

    toml = tmp_path / "serve.toml"
    toml.write_text('dashboard = "127.0.0.1:9100"\ndashboard-linger = 5\n')

    cfg = merge({"dashboard_linger": 1.5}, str(toml))

    assert cfg.dashboard == "127.0.0.1:9100" and cfg.dashboard_linger == 1.5
    with pytest.raises(ValueError, match="--dashboard"):
        merge({"dashboard": "localhost:http"})


def test_a_taken_port_is_a_clear_error(dashboard: Dashboard) -> None:
    host, port = dashboard.address

    with pytest.raises(RuntimeError, match="cannot listen"):
        Dashboard(f"{host}:{port}")


def test_a_lingering_dashboard_says_the_job_is_done(dashboard: Dashboard) -> None:
    # Prepare: the last snapshot of a run, taken while it was learning
    import io
    import threading

    dashboard.publish({**RECORD, "state": "learning"})
    stop = threading.Event()
    stop.set()  # the linger itself is not what is tested
    # Execute
    dashboard.linger(120.0, stop, io.StringIO())
    # Assert
    state = json.loads(get(dashboard.url + "api/state")[2])
    assert state["state"] == "done"
    assert state["accuracy"] == RECORD["accuracy"] and len(state["history"]) == 1
