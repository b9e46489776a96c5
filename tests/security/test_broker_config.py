"""`edgeps broker-config`: per-worker users and ACLs, on a real mosquitto."""

from __future__ import annotations

import base64
import getpass
import hashlib
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from edgeps.cli import main
from edgeps.security.mosquitto import (
    Listen,
    acl_text,
    hash_password,
    mosquitto_conf,
    parse_listen,
)

from tests.conftest import free_port
from tests.helpers.acl_clients import GeneratedBroker, RecordingClient

JOB = "lab"
WORKERS = ("w00", "w01")
HOST = "edgeps-host"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("127.0.0.1:1883", Listen("127.0.0.1", 1883)),
        ("0.0.0.0:8883", Listen("0.0.0.0", 8883)),
        (":1884", Listen("", 1884)),
        ("[::1]:1883", Listen("::1", 1883)),
    ],
)
def test_parse_listen(text: str, want: Listen) -> None:
    assert parse_listen(text) == want


@pytest.mark.parametrize("bad", ["1883", "h:0", "h:65536", "h:x", "a b:1", ""])
def test_parse_listen_refuses(bad: str) -> None:
    with pytest.raises(ValueError, match="--listen"):
        parse_listen(bad)


def test_acl_confines_each_worker_to_its_topics() -> None:
    # Execute
    text = acl_text(JOB, ["w00", "w01"], HOST)

    # Assert: the host section, then one section per worker
    sections = [s.splitlines() for s in text.split("\n\n")]
    assert sections[1] == [
        f"user {HOST}",
        "topic readwrite edgeps/lab/#",
        "topic read $SYS/#",
    ]
    assert sections[2] == [
        "user w00",
        "topic write edgeps/lab/up/w00",
        "topic read edgeps/lab/down/w00",
        "topic read edgeps/lab/model",
        "topic read edgeps/lab/params/#",
    ]
    assert sections[3][0] == "user w01" and len(sections) == 4


@pytest.mark.parametrize(
    ("job", "workers", "host"),
    [("l/b", ["w0"], HOST), (JOB, ["w#"], HOST), (JOB, ["w0"], "w0"), (JOB, [], "a b")],
)
def test_acl_refuses_bad_names(job: str, workers: list[str], host: str) -> None:
    with pytest.raises(ValueError):
        acl_text(job, workers, host)


def test_conf_has_the_listener_auth_persistence_and_queue_limits(
    tmp_path: Path,
) -> None:
    # Execute
    lines = mosquitto_conf(
        Listen("127.0.0.1", 1883), tmp_path, run_as="mosquitto", job=JOB
    ).splitlines()

    # Assert
    d = tmp_path.resolve()
    for want in [
        "listener 1883 127.0.0.1",
        "allow_anonymous false",
        f"password_file {d}/passwd",
        f"acl_file {d}/acl",
        "persistence true",
        f"persistence_location {d}/",
        "max_inflight_messages 100",
        "max_queued_messages 10000",
        "set_tcp_nodelay true",
        "user mosquitto",
    ]:
        assert want in lines
    every = mosquitto_conf(Listen("", 1883), tmp_path, run_as=None, job=JOB)
    assert "listener 1883" in every.splitlines()
    assert "\nuser " not in every


def test_password_hash_is_mosquittos_pbkdf2_sha512_format() -> None:
    # Prepare
    salt = bytes(range(12))

    # Execute
    line = hash_password("correct horse", salt=salt)

    # Assert: $7$iterations$salt$hash, recomputed independently
    tag, iterations, salt64, hash64 = line.split("$")[1:]
    want = hashlib.pbkdf2_hmac("sha512", b"correct horse", salt, 101, 64)
    assert (tag, iterations) == ("7", "101")
    assert base64.b64decode(salt64) == salt
    assert base64.b64decode(hash64) == want
    assert hash_password("correct horse") != hash_password("correct horse")


def _generate(out: Path, port: int, hasher: str, *extra: str) -> int:
    return main(
        ["broker-config", "--job", JOB, "--workers", ",".join(WORKERS)]
        + ["--out", str(out), "--listen", f"127.0.0.1:{port}"]
        + ["--run-as", getpass.getuser(), "--hasher", hasher, *extra]
    )


@pytest.fixture(params=["tool", "builtin"])
def acl_broker(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[GeneratedBroker]:
    """A mosquitto started from a fresh `edgeps broker-config` setup."""
    port = free_port()
    out = tmp_path / "broker"
    assert _generate(out, port, request.param) == 0
    broker = GeneratedBroker(out / "mosquitto.conf", port, tmp_path / "mosquitto.log")
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


def _client(
    broker: GeneratedBroker, user: str, password: str | None = None
) -> RecordingClient:
    if password is None:
        path = broker.conf.parent / "credentials" / f"{user}.password"
        password = path.read_text().strip()
    client = RecordingClient(broker.port, user, password)
    assert client.connect(), f"{user} was refused: {client.reason}"
    return client


def test_setup_files_are_private_and_refuse_overwrite(tmp_path: Path) -> None:
    # Prepare
    out = tmp_path / "broker"

    # Execute
    first = _generate(out, 1883, "builtin")
    again = _generate(out, 1883, "builtin")
    old = (out / "credentials" / "w00.password").read_text()
    forced = _generate(out, 1883, "builtin", "--force")

    # Assert
    assert (first, again, forced) == (0, 2, 0)
    assert (out / "credentials" / "w00.password").read_text() != old
    users = {p.stem for p in (out / "credentials").iterdir()}
    assert users == {HOST, *WORKERS}
    for path in [*(out / "credentials").iterdir(), out / "passwd", out / "acl"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    passwd_users = [ln.split(":")[0] for ln in (out / "passwd").read_text().split()]
    assert passwd_users == [HOST, *WORKERS]


@pytest.mark.integration
def test_unknown_users_and_wrong_passwords_cannot_connect(
    acl_broker: GeneratedBroker,
) -> None:
    # Prepare
    w00 = (acl_broker.conf.parent / "credentials" / "w00.password").read_text()
    attempts = {
        "unknown user": RecordingClient(acl_broker.port, "w99", w00.strip()),
        "wrong password": RecordingClient(acl_broker.port, "w00", "not-it"),
        "other's password": RecordingClient(acl_broker.port, "w01", w00.strip()),
        "anonymous": RecordingClient(acl_broker.port, None, None),
        "right password": RecordingClient(acl_broker.port, "w00", w00.strip()),
    }

    # Execute
    accepted = {}
    for name, client in attempts.items():
        try:
            accepted[name] = client.connect()
        finally:
            client.close()

    # Assert
    assert accepted == {
        "unknown user": False,
        "wrong password": False,
        "other's password": False,
        "anonymous": False,
        "right password": True,
    }


@pytest.mark.integration
def test_a_worker_cannot_publish_as_another(acl_broker: GeneratedBroker) -> None:
    # Prepare
    host = _client(acl_broker, HOST)
    w00 = _client(acl_broker, "w00")
    assert host.subscribe(f"edgeps/{JOB}/#") == [1]

    # Execute: forgeries first; the broker keeps one client's order
    try:
        w00.publish(f"edgeps/{JOB}/up/w01", b"forged update")
        w00.publish(f"edgeps/{JOB}/down/w01", b"forged release")
        w00.publish(f"edgeps/{JOB}/model", b"forged done")
        w00.publish(f"edgeps/{JOB}/params/all", b"forged params")
        w00.publish(f"edgeps/{JOB}/up/w00", b"own update")
        seen = host.until(f"edgeps/{JOB}/up/w00", b"own update")
    finally:
        w00.close()
        host.close()

    # Assert: the host's subscriber saw only the worker's own topic
    assert [(t, p) for t, p, _ in seen] == [(f"edgeps/{JOB}/up/w00", b"own update")]


@pytest.mark.integration
def test_a_worker_reads_only_its_own_down_topic(acl_broker: GeneratedBroker) -> None:
    # Prepare
    host = _client(acl_broker, HOST)
    w00 = _client(acl_broker, "w00")
    allowed = w00.subscribe(
        f"edgeps/{JOB}/down/w00", f"edgeps/{JOB}/model", f"edgeps/{JOB}/params/#"
    )
    # mosquitto 2.0 grants these (SUBACK 1) and checks the ACL on each delivery
    w00.subscribe(
        f"edgeps/{JOB}/down/w01", f"edgeps/{JOB}/up/+", f"edgeps/{JOB}/#", "$SYS/#"
    )

    # Execute
    try:
        host.publish(f"edgeps/{JOB}/down/w01", b"w01's release")
        host.publish(f"edgeps/{JOB}/up/w01", b"w01's update")
        host.publish(f"edgeps/{JOB}/down/w00", b"w00's release")
        host.publish(f"edgeps/{JOB}/model", b"model")
        host.publish(f"edgeps/{JOB}/params/all", b"shared params")
        seen = w00.until(f"edgeps/{JOB}/params/all", b"shared params")
    finally:
        w00.close()
        host.close()

    # Assert: every message meant for others was withheld (wildcards included)
    assert allowed == [1, 1, 1]
    assert {(t, p) for t, p, _ in seen} == {
        (f"edgeps/{JOB}/down/w00", b"w00's release"),
        (f"edgeps/{JOB}/model", b"model"),
        (f"edgeps/{JOB}/params/all", b"shared params"),
    }


@pytest.mark.integration
def test_the_host_publishes_and_reads_everywhere_in_the_job(
    acl_broker: GeneratedBroker,
) -> None:
    # Prepare
    host = _client(acl_broker, HOST)
    topics = [f"edgeps/{JOB}/{t}" for t in ("up/w00", "down/w01", "model", "params/x")]

    # Execute
    try:
        granted = host.subscribe(f"edgeps/{JOB}/#", "$SYS/broker/version")
        sys_topic, version, _ = host.messages.get(timeout=10)
        for topic in topics:
            host.publish(topic, topic.encode())
        seen = host.until(topics[-1], topics[-1].encode())
    finally:
        host.close()

    # Assert
    assert granted == [1, 1]
    assert sys_topic == "$SYS/broker/version" and version.startswith(b"mosquitto")
    assert [(t, p) for t, p, _ in seen] == [(t, t.encode()) for t in topics]


@pytest.mark.integration
def test_the_retained_model_survives_a_broker_restart(
    acl_broker: GeneratedBroker,
) -> None:
    # Prepare
    host = _client(acl_broker, HOST)
    try:
        host.publish(f"edgeps/{JOB}/model", b"model v7", retain=True)
    finally:
        host.close()

    # Execute
    acl_broker.stop()
    acl_broker.start()
    w01 = _client(acl_broker, "w01")
    try:
        w01.subscribe(f"edgeps/{JOB}/model")
        got = w01.messages.get(timeout=10)
    finally:
        w01.close()

    # Assert
    assert got == (f"edgeps/{JOB}/model", b"model v7", True)
    assert (acl_broker.conf.parent / "mosquitto.db").exists()
