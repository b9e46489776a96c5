"""Accounting on a real mosquitto: an unknown client's junk, $SYS, passwords.

Issue 9, observation 8: rejections of unknown workers were absent from the
`--json` summary and the metrics; wire-level drops were job-wide totals; what
the broker dropped for serve was invisible; `emulate` took the password only
on the command line.
"""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.runtime.summary import summary_table
from edgeps.security.mosquitto import write_password_file
from edgeps.transport.options import ConnectionOptions
from edgeps_worker import wire_host as wire

from tests.conftest import Broker, start_mosquitto
from tests.e2e.test_faults import Spy, finish, start_job, wait_for

pytestmark = pytest.mark.integration


def _serve(url: str, job: str, metrics: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [
        sys.executable, "-m", "edgeps", "serve", "--broker", url, "--job", job,
        "--policy", "asp", "--max-time", "10", "--json", "--quiet",
        "--metrics-out", str(metrics), "--metrics-interval", "0.5", *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _broker(tmp_path: Path, config: str) -> Broker:
    """A real mosquitto on a fresh port with ``config`` after its listener line."""
    d = tmp_path / "broker"
    d.mkdir()
    broker = start_mosquitto(d)
    broker.stop()
    # as root, mosquitto would switch to its own user, who cannot read tmp_path
    me = getpass.getuser()
    broker.conf.write_text(f"listener {broker.port} 127.0.0.1\nuser {me}\n{config}")
    broker.restart()
    return broker


def _end(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_summary_and_metrics_list_an_unknown_clients_junk_per_reason(
    tmp_path: Path,
) -> None:
    # Prepare: mosquitto publishing $SYS every second; serve; two sensors
    broker = start_mosquitto(tmp_path)
    with broker.conf.open("a") as f:
        f.write("sys_interval 1\n")
    broker.restart()
    metrics = tmp_path / "m.jsonl"
    serve = _serve(broker.url, "acct", metrics)
    spy = Spy(broker.host, broker.port, [wire.topic_model("acct")])
    emu = None
    try:
        assert wait_for(lambda: bool(spy.messages()), 30)  # serve is up
        emu = Emulation(broker.url, "acct", n_workers=2, duration=30.0).start()
        time.sleep(1.0)

        # Execute: a client that never joined sends junk and a bare update
        ghost = wire.topic_up("acct", "ghost")
        spy.publish(ghost, b"garbage")
        spy.publish(ghost, b"EP" + bytes(60))
        spy.publish(ghost, wire.encode_hello("acct", "ghost", 0, 1, model="mlp:5-4-3"))
        for chunk in wire.encode_update(
            "acct", "ghost", 5, 1, 1, 0, 0.01, 8, 0.5, bytes(4 * 8)
        ):
            spy.publish(ghost, chunk)
        spy.publish(wire.topic_up("acct", "w00"), b"garbage")  # on a worker's topic
        out, err = _end(serve)
    finally:
        if emu is not None:
            emu.stop()
            emu.join(20)
        spy.close()
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
        broker.stop()

    # Assert: the JSON summary names every refusal's sender, per reason
    assert serve.returncode == 0, err
    summary = json.loads(out)
    unknown = summary["unknown"]
    assert unknown["rejected_by_reason"] == {"model_mismatch": 1, "unknown_worker": 1}
    assert unknown["dropped"] == 2  # garbage and a short frame on ghost's topic
    assert summary["workers"]["w00"]["dropped"] == 1
    assert summary["workers"]["w00"]["accepted"] > 0
    assert "ghost" not in summary["workers"]
    assert summary["broker"]["sys"] == "ok"
    assert isinstance(summary["broker"]["publish_dropped"], int)
    assert summary["broker"]["inbox_full"] == 0
    # and so does the metrics file that the dashboard and Prometheus read
    last = json.loads(metrics.read_text().splitlines()[-1])
    assert last["unknown"] == unknown
    assert (
        last["workers"]["w00"]["dropped_by_reason"]
        == (summary["workers"]["w00"]["dropped_by_reason"])
    )


def test_a_refused_sys_subscription_is_said_in_the_summary(tmp_path: Path) -> None:
    # Prepare: an ACL that gives anonymous clients the job's topics, not $SYS
    acl = tmp_path / "acl"
    acl.write_text("topic readwrite edgeps/#\n")
    broker = _broker(
        tmp_path,
        f"allow_anonymous true\nacl_file {acl}\npersistence false\nsys_interval 1\n",
    )
    try:
        job, host = start_job(broker.url, "sysacl", "asp", None)
        coord = job.coordinator
        assert coord is not None

        # Execute: $SYS (retained) would be heard within a second if readable
        heard = wait_for(lambda: coord.accounting.sys_heard, 3)
        job.stop()
        summary = finish(job, host)
    finally:
        broker.stop()

    # Assert
    assert not heard
    assert summary.broker["sys"] == "unreadable"
    assert summary.broker["publish_dropped"] is None
    assert "serve heard nothing on $SYS (an ACL refuses it" in summary_table(summary)


def test_emulate_and_serve_take_the_password_from_a_file(tmp_path: Path) -> None:
    # Prepare: a broker that wants a login
    passwd = tmp_path / "passwd"
    write_password_file(passwd, {"host": "hpw-1", "sensors": "spw-2"}, tool=None)
    broker = _broker(
        tmp_path,
        f"allow_anonymous false\npassword_file {passwd}\npersistence false\n",
    )
    (tmp_path / "host.pw").write_text("hpw-1\n")
    (tmp_path / "sensors.pw").write_text("spw-2\n")
    (tmp_path / "wrong.pw").write_text("nope\n")
    login = ["--username", "host", "--password-file", str(tmp_path / "host.pw")]
    serve = _serve(broker.url, "pw", tmp_path / "m.jsonl", *login)
    emulate = [
        sys.executable, "-m", "edgeps", "emulate", "--broker", broker.url,
        "--job", "pw", "--workers", "2", "--max-time", "6", "--json",
        "--username", "sensors", "--password-file",
    ]  # fmt: skip
    try:
        # Execute
        good = subprocess.run(
            [*emulate, str(tmp_path / "sensors.pw")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        bad = subprocess.run(
            [*emulate, str(tmp_path / "wrong.pw"), "--max-time", "2"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        out, err = _end(serve)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
        broker.stop()

    # Assert: the right passwords train; a wrong one joins nothing
    assert serve.returncode == 0, err
    workers = json.loads(out)["workers"]
    assert workers["w00"]["accepted"] > 0 and workers["w01"]["accepted"] > 0
    assert good.returncode == 0, good.stderr
    report = json.loads(bad.stdout)
    assert all(w["clock"] == 0 for w in report["workers"])
    assert ConnectionOptions(broker.url).username is None  # nothing leaked to defaults
