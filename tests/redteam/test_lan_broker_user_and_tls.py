"""`serve --lan` never runs its broker as root, and offers TLS.

Observed before: run as root, the generated mosquitto.conf said ``user root``
on a 0.0.0.0 listener, and there was no TLS to turn on: board passwords and
every message crossed the LAN in clear.
"""

from __future__ import annotations

import getpass
import json
import os
import pwd
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from edgeps.runtime.config import ServeConfig
from edgeps.runtime.lan import prepare_lan
from edgeps.security.mosquitto import Listen, mosquitto_conf

from tests.conftest import free_port
from tests.helpers.lan_dirs import lan_home  # noqa: F401 (a fixture)
from tests.helpers.tls_certs import make_certs
from tests.redteam._held import held

ROOT = os.geteuid() == 0


def has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def lan(tmp_path: Path, **kw: object) -> ServeConfig:
    base: dict[str, object] = {
        "job": "lab", "lan": True, "boards": "pi-1",
        "job_dir": str(tmp_path / "jd"), "listen": "0.0.0.0:1883",
    }  # fmt: skip
    base.update(kw)
    return ServeConfig(**base)  # type: ignore[arg-type]


def conf_lines(tmp_path: Path) -> list[str]:
    return (tmp_path / "jd/broker/mosquitto.conf").read_text().splitlines()


def test_a_root_broker_on_the_network_is_refused() -> None:
    with pytest.raises(ValueError, match="would run as root on 0.0.0.0:1883"):
        mosquitto_conf(Listen("0.0.0.0", 1883), Path("/x"), run_as="root", job="lab")
    # on loopback only this machine reaches it (the tests' own brokers)
    mosquitto_conf(Listen("127.0.0.1", 1883), Path("/x"), run_as="root", job="lab")


def test_the_lan_broker_runs_as_mosquitto_or_as_serve_never_root(
    tmp_path: Path,
) -> None:
    if ROOT and not has_user("mosquitto"):
        with pytest.raises(ValueError, match="no `mosquitto` system user"):
            prepare_lan(lan(tmp_path))
        return
    prepare_lan(lan(tmp_path))
    users = [ln for ln in conf_lines(tmp_path) if ln.startswith("user ")]
    want = "user mosquitto" if ROOT else f"user {getpass.getuser()}"
    held(users == [want], "serve --lan: the broker never runs as root", users)


def test_lan_tls_makes_a_ca_and_a_tls_listener(tmp_path: Path) -> None:
    # Execute
    served, broker = prepare_lan(lan(tmp_path, listen=None, lan_tls=True))
    # Assert: port 8883, certfile/keyfile on the listener, serve trusts the job CA
    assert broker is not None and broker.tls is not None
    lines = conf_lines(tmp_path)
    assert "listener 8883 0.0.0.0" in lines
    assert any(ln.startswith("certfile ") for ln in lines)
    assert served.broker == "mqtts://127.0.0.1:8883"
    assert served.tls_ca == str(tmp_path / "jd/tls/ca.pem")
    assert broker.board_url.startswith("mqtts://")
    for key in (tmp_path / "jd/tls/ca.key", tmp_path / "jd/broker/server.key"):
        assert (key.stat().st_mode & 0o077) == 0, key
    text = "\n".join(broker.instructions())
    assert "--tls-ca" in text and "ca.pem" in text


def test_plain_lan_says_it_is_in_clear(tmp_path: Path) -> None:
    _, broker = prepare_lan(lan(tmp_path))
    assert broker is not None
    assert "--lan-tls puts it on TLS" in "\n".join(broker.instructions())


def test_lan_cert_needs_its_key(tmp_path: Path) -> None:
    cert = tmp_path / "c.pem"
    cert.write_text("x")
    with pytest.raises(ValueError, match="--lan-cert and --lan-key"):
        prepare_lan(lan(tmp_path, lan_cert=str(cert)))


def test_a_job_dir_the_broker_user_cannot_reach_is_refused(tmp_path: Path) -> None:
    if not (ROOT and has_user("mosquitto")):
        pytest.skip("only root hands the broker to another user")
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    _, broker = prepare_lan(lan(tmp_path, job_dir=str(closed / "jd")))
    assert broker is not None
    with pytest.raises(ValueError, match="cannot enter .*closed"):
        broker.start()  # refused before mosquitto would fail in silence


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(x) for x in text.split()]


@pytest.mark.integration
@pytest.mark.slow
def test_a_board_trains_over_the_lan_tls_broker(
    tmp_path: Path,
    lan_home: Path,  # noqa: F811
) -> None:
    if ROOT and not has_user("mosquitto"):
        pytest.skip("root without a mosquitto system user: --lan refuses (tested)")
    # Prepare: serve --lan --lan-tls on a fresh port
    port, jd = free_port(), lan_home / "jd"
    edgeps = [sys.executable, "-m", "edgeps"]
    log = tmp_path / "serve.err"
    with log.open("w") as err_file:
        serve = subprocess.Popen(
            [*edgeps, "serve", "--lan", "--lan-tls", "--boards", "pi-1", "--job",
             "lab", "--job-dir", str(jd), "--listen", f"0.0.0.0:{port}",
             "--max-time", "20", "--json", "--quiet"],
            stdout=subprocess.PIPE, stderr=err_file, text=True,
        )  # fmt: skip
    worker = None
    try:
        deadline = time.monotonic() + 60
        while "edgeps serve: job lab on" not in log.read_text():
            assert time.monotonic() < deadline and serve.poll() is None, log.read_text()
            time.sleep(0.2)
        brokers = [p for p in children(serve.pid) if "mosquitto" in
                   Path(f"/proc/{p}/cmdline").read_text()]  # fmt: skip
        owner = [pwd.getpwuid(os.stat(f"/proc/{p}").st_uid).pw_name for p in brokers]
        # Execute: a board with its password, key and the job's CA, over TLS
        worker = subprocess.run(
            [*edgeps, "worker", "--broker", f"mqtts://127.0.0.1:{port}",
             "--tls-ca", str(jd / "tls/ca.pem"), "--username", "pi-1",
             "--password-file", str(jd / "broker/credentials/pi-1.password"),
             "--hmac-key-file", str(jd / "keys/pi-1.key"), "--job", "lab",
             "--id", "pi-1", "--emulated", "sensors:0/2", "--max-iterations", "40"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        out, _ = serve.communicate(timeout=60)
        err = log.read_text()
    finally:
        if serve.poll() is None:
            serve.send_signal(signal.SIGTERM)
            serve.wait(timeout=30)
    # Assert: the broker ran as mosquitto (root) or as this user; the board trained
    want = "mosquitto" if ROOT else getpass.getuser()
    held(owner == [want], "the LAN broker process is not root", owner)
    summary = json.loads(out)
    accepted = summary["workers"].get("pi-1", {}).get("accepted", 0)
    held(
        accepted > 0,
        "a board trains over the TLS LAN broker",
        (accepted, worker.stderr[-500:] if worker else "", err[-500:]),
    )


def test_a_given_certificate_is_served_and_serve_trusts_its_own_hop(
    tmp_path: Path,
) -> None:
    # Prepare: a certificate made elsewhere (for the boards' name, not 127.0.0.1)
    certs = tmp_path / "certs"
    certs.mkdir()
    ca, cert, key = make_certs(certs, names="DNS:broker.lan", cn="broker.lan")
    # Execute
    served, broker = prepare_lan(
        lan(tmp_path, listen=None, lan_cert=str(cert), lan_key=str(key))
    )
    # Assert: copies in broker/ on a TLS listener; serve's loopback hop skips
    # the name check (the certificate names the boards' host, not 127.0.0.1)
    assert broker is not None and broker.tls is not None and broker.tls.ca is None
    d = tmp_path / "jd/broker"
    assert (d / "server.pem").read_text() == cert.read_text()
    assert (d / "server.key").read_text() == key.read_text()
    assert (d / "server.key").stat().st_mode & 0o077 == 0
    assert f"certfile {d / 'server.pem'}" in conf_lines(tmp_path)
    assert served.broker == "mqtts://127.0.0.1:8883" and served.tls_insecure
    assert ca.is_file()
