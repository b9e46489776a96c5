"""`edgeps serve` and `edgeps worker` through a broker from `edgeps broker-config`."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from pathlib import Path

import pytest
from edgeps.cli import main

from tests.conftest import free_port
from tests.helpers.acl_clients import GeneratedBroker


def _worker(
    url: str, wid: str, user: str, password_file: Path
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "worker", "--broker", url, "--job", "acl",
         "--id", wid, "--emulated", "sensors:0/2", "--username", user,
         "--password-file", str(password_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.integration
def test_a_job_trains_through_the_acls_and_a_borrowed_login_gets_nowhere(
    tmp_path: Path,
) -> None:
    # Prepare: the broker, the host with its login from a TOML config, two
    # workers with their own logins, and a third id using w00's login
    port = free_port()
    out = tmp_path / "broker"
    assert main(
        ["broker-config", "--job", "acl", "--workers", "w00,w01", "--out", str(out),
         "--listen", f"127.0.0.1:{port}", "--run-as", getpass.getuser()]
    ) == 0  # fmt: skip
    creds = out / "credentials"
    host_cfg = tmp_path / "serve.toml"
    host_pw = creds / "edgeps-host.password"
    host_cfg.write_text(f'username = "edgeps-host"\npassword-file = "{host_pw}"\n')
    broker = GeneratedBroker(out / "mosquitto.conf", port, tmp_path / "mosquitto.log")
    broker.start()
    url = f"mqtt://127.0.0.1:{port}"
    procs: list[subprocess.Popen[str]] = []
    try:
        serve = subprocess.Popen(
            [sys.executable, "-m", "edgeps", "serve", "--broker", url, "--job", "acl",
             "--config", str(host_cfg), "--policy", "asp", "--max-time", "8",
             "--json", "--quiet", "--target-accuracy", "0.999"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        procs.append(serve)
        procs += [
            _worker(url, "w00", "w00", creds / "w00.password"),
            _worker(url, "w01", "w01", creds / "w01.password"),
            _worker(url, "pi-9", "w00", creds / "w00.password"),
        ]

        # Execute
        out_text, err = serve.communicate(timeout=90)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        broker.stop()

    # Assert: both real workers trained; the borrowed login never joined
    assert serve.returncode == 0, err
    workers = json.loads(out_text)["workers"]
    assert workers["w00"]["accepted"] > 5, workers
    assert workers["w01"]["accepted"] > 5, workers
    assert "pi-9" not in workers
