"""The paho worker transport on real links: TLS, passwords, late brokers, new hosts."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from edgeps.pyworker.model_fetch import fetch_model
from edgeps.transport.broker import parse_broker_url
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink

from tests.conftest import free_port, mosquitto_path
from tests.pyworker.test_worker_on_broker import ScriptedPS, _worker, wait_until


def _run(*cmd: str, cwd: Path) -> None:
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass
class SecureBroker:
    plain_port: int  # anonymous, for the scripted PS
    tls_port: int  # TLS + username/password, for workers
    ca: Path


@pytest.fixture
def secure_broker(tmp_path: Path) -> Iterator[SecureBroker]:
    """mosquitto with a plain listener and a TLS listener that needs a password."""
    exe = mosquitto_path()
    if exe is None:
        pytest.fail("mosquitto is not installed")
    ssl = ["openssl"]
    _run(*ssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
         "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=edgeps test CA",
         cwd=tmp_path)  # fmt: skip
    _run(*ssl, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key",
         "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=tmp_path)  # fmt: skip
    (tmp_path / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _run(*ssl, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey",
         "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "1",
         "-extfile", "ext.cnf", cwd=tmp_path)  # fmt: skip
    _run("mosquitto_passwd", "-b", "-c", "pw", "sensor", "s3cret", cwd=tmp_path)
    plain, tls = free_port(), free_port()
    conf = tmp_path / "secure.conf"
    # as root, mosquitto would drop to its own user and lose access to the key
    user = "user root\n" if os.geteuid() == 0 else ""
    conf.write_text(
        f"{user}per_listener_settings true\npersistence false\n"
        f"listener {plain} 127.0.0.1\nallow_anonymous true\n"
        f"listener {tls} 127.0.0.1\nallow_anonymous false\n"
        f"password_file {tmp_path / 'pw'}\ncafile {tmp_path / 'ca.pem'}\n"
        f"certfile {tmp_path / 'server.pem'}\nkeyfile {tmp_path / 'server.key'}\n"
    )
    proc = subprocess.Popen(
        [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert wait_until(lambda: _listening(plain) and _listening(tls), 10)
        yield SecureBroker(plain, tls, tmp_path / "ca.pem")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _listening(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def test_broker_urls() -> None:
    assert parse_broker_url("mqtt://h:1234") == parse_broker_url("mqtt://h:1234")
    assert parse_broker_url("mqtt://h").port == 1883
    assert parse_broker_url("mqtts://h").port == 8883
    assert parse_broker_url("mqtts://h").tls
    for bad in ("h:1883", "http://h", "mqtt://", "mqtt://h:99999", 5):
        with pytest.raises(ValueError):
            parse_broker_url(bad)  # type: ignore[arg-type]


def test_transport_refuses_nonsense_settings() -> None:
    with pytest.raises(ValueError):
        MqttLink(ConnectionOptions("mqtt://h:0"), "c")
    with pytest.raises(ValueError):
        MqttLink(ConnectionOptions("mqtt://h:1883", password="x"), "c")
    with pytest.raises(ValueError):
        MqttLink(ConnectionOptions("mqtt://h:1883", keepalive=0), "c")


def test_unreachable_broker_is_an_oserror() -> None:
    t = MqttLink(
        ConnectionOptions(f"mqtt://127.0.0.1:{free_port()}"), "c", connect_timeout=2
    )
    with pytest.raises(OSError):
        t.connect("edgeps/j/up/c", b"")
    assert not t.connected
    with pytest.raises(OSError):
        t.poll(10)


@pytest.mark.integration
def test_tls_worker_with_password_trains(secure_broker: SecureBroker) -> None:
    # Prepare
    ps = ScriptedPS(secure_broker.plain_port, "job1")
    secret = secure_broker.ca.parent / "mqtt.pass"
    secret.write_text("s3cret\n")
    cmd = [sys.executable, "-m", "edgeps", "worker", "--broker",
           f"mqtts://127.0.0.1:{secure_broker.tls_port}", "--job", "job1",
           "--id", "tls1", "--emulated", "sensors:0/2", "--tls-ca",
           str(secure_broker.ca), "--username", "sensor", "--password-file",
           str(secret), "--max-iterations", "8"]  # fmt: skip
    try:
        # Execute
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    finally:
        ps.close()
    # Assert
    assert proc.returncode == 0, proc.stderr
    assert ps.updates["tls1"] == 8


@pytest.mark.integration
def test_wrong_password_or_untrusted_ca_is_refused(
    secure_broker: SecureBroker, tmp_path: Path
) -> None:
    # Prepare
    port = secure_broker.tls_port
    url = f"mqtts://127.0.0.1:{port}"
    wrong_pw = MqttLink(
        ConnectionOptions(url, username="sensor", password="nope",
                          tls_ca=str(secure_broker.ca)),
        "x1", connect_timeout=5,
    )  # fmt: skip
    other_ca = tmp_path / "other"
    other_ca.mkdir()
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
         "k", "-out", "ca.pem", "-days", "1", "-subj", "/CN=other",
         cwd=other_ca)  # fmt: skip
    untrusted = MqttLink(
        ConnectionOptions(url, username="sensor", password="s3cret",
                          tls_ca=str(other_ca / "ca.pem")),
        "x2", connect_timeout=5,
    )  # fmt: skip
    # Execute / Assert
    with pytest.raises(OSError, match="refused"):
        wrong_pw.connect("edgeps/job1/up/x1", b"")
    with pytest.raises(OSError):
        untrusted.connect("edgeps/job1/up/x2", b"")
    assert fetch_model(wrong_pw, "job1", timeout=1.0) is None


@pytest.mark.integration
def test_worker_started_before_the_broker_joins_when_it_comes(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: no broker yet
    mosquitto.stop()
    stop = threading.Event()
    w = _worker(mosquitto.port, "late", 1, stop=stop.is_set)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    assert wait_until(lambda: w.stats["reconnects"] >= 2)
    # Execute
    mosquitto.restart()
    ps = ScriptedPS(mosquitto.port, "job1")
    try:
        joined = wait_until(lambda: ps.updates["late"] >= 3, timeout=30)
    finally:
        stop.set()
        th.join(timeout=10)
        ps.close()
    # Assert
    assert joined and not th.is_alive()


@pytest.mark.integration
def test_worker_resumes_with_a_restarted_host(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    first = ScriptedPS(mosquitto.port, "job1")
    stop = threading.Event()
    w = _worker(mosquitto.port, "w1", 0, stop=stop.is_set, release_timeout_ms=500)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    try:
        assert wait_until(lambda: first.updates["w1"] >= 3)
        # the first host takes one more update and then goes away without
        # releasing it, so only the worker's release timeout can resync it
        first.hold = True
        seen = first.updates["w1"]
        assert wait_until(lambda: first.updates["w1"] > seen)
        # Execute: a new host takes over the job
        first.close()
        second = ScriptedPS(mosquitto.port, "job1")
        try:
            resumed = wait_until(lambda: second.updates["w1"] >= 3, timeout=30)
        finally:
            second.close()
    finally:
        stop.set()
        th.join(timeout=10)
    # Assert
    assert resumed
    assert w.stats["timeouts"] >= 1 and w.stats["reconnects"] == 0


@pytest.mark.integration
def test_persistent_worker_waits_for_the_next_run_of_the_job(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: a service-style worker and a first run of the job
    first = ScriptedPS(mosquitto.port, "job1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
         "--job", "job1", "--id", "svc", "--emulated", "sensors:0/2",
         "--persist"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert wait_until(lambda: first.updates["svc"] >= 3)
        # Execute: the run ends, then the host starts the job again
        first.finish()
        left = wait_until(lambda: ("svc", "bye") in first.byes)
        first.close()
        alive_between_runs = proc.poll() is None
        second = ScriptedPS(mosquitto.port, "job1")
        try:
            rejoined = wait_until(lambda: second.updates["svc"] >= 3, timeout=30)
        finally:
            second.close()
        proc.terminate()
        code = proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    # Assert
    assert left and alive_between_runs and rejoined
    assert code == 0
    assert second.instances["svc"][0] != first.instances["svc"][0]


def _publish_raw(port: int, topic: str, payload: bytes, retain: bool = False) -> None:
    t = MqttLink(
        ConnectionOptions(f"mqtt://127.0.0.1:{port}"), "raw", connect_timeout=5
    )
    t.connect("edgeps/raw/will", b"")
    try:
        t.publish(topic, payload, 1, retain)
    finally:
        t.close()


@pytest.mark.integration
def test_garbage_on_the_model_topic_is_skipped_until_a_real_model(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: a retained junk message where the job's MODEL should be
    _publish_raw(mosquitto.port, "edgeps/job1/model", b"\x00junk" * 7, retain=True)
    result: list[object] = []
    t = MqttLink(ConnectionOptions(mosquitto.url), "f1", connect_timeout=5)
    th = threading.Thread(
        target=lambda: result.append(fetch_model(t, "job1", timeout=30)), daemon=True
    )
    th.start()
    # Execute: the host comes up and replaces it
    ps = ScriptedPS(mosquitto.port, "job1")
    try:
        th.join(timeout=40)
    finally:
        ps.close()
    # Assert
    assert not th.is_alive()
    (job,) = result
    assert job is not None
    assert job.state == "running" and job.model == "mlp:33-32-6"  # type: ignore[attr-defined]


@pytest.mark.integration
def test_garbage_on_the_down_topic_is_counted_and_training_goes_on(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare
    ps = ScriptedPS(mosquitto.port, "job1")
    stop = threading.Event()
    w = _worker(mosquitto.port, "w1", 0, stop=stop.is_set)
    th = threading.Thread(target=w.run, daemon=True)
    th.start()
    try:
        assert wait_until(lambda: ps.updates["w1"] >= 3)
        # Execute
        for junk in (b"", b"EP", b"\xff" * 100, b"EP\x01\x03" + b"\x00" * 40):
            _publish_raw(mosquitto.port, "edgeps/job1/down/w1", junk)
        counted = wait_until(lambda: w.stats["bad_messages"] >= 3)
        before = ps.updates["w1"]
        going = wait_until(lambda: ps.updates["w1"] >= before + 5)
    finally:
        stop.set()
        th.join(timeout=10)
        ps.close()
    # Assert
    assert counted and going
    assert w.stop_reason == "stopped"
