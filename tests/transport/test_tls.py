"""`edgeps serve` over TLS with a password: a mosquitto with its own test CA."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from edgeps.transport.broker import free_port, mosquitto_path, wait_listening
from edgeps.transport.options import PASSWORD_ENV

from tests.helpers.tls_certs import make_certs

pytestmark = pytest.mark.integration


def _run(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=60)


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """mosquitto with a TLS listener (cert for IP 127.0.0.1) and user 'edge'."""
    exe = mosquitto_path()
    if exe is None or shutil.which("openssl") is None:
        pytest.skip("needs mosquitto and openssl")
    ca, cert, key = make_certs(tmp_path)
    passwd = tmp_path / "passwd"
    _run("mosquitto_passwd", "-b", "-c", str(passwd), "edge", "s3cret")
    port = free_port()
    conf = tmp_path / "tls.conf"
    # as root, mosquitto would drop to a user that cannot read tmp_path
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous false\n"
        f"password_file {passwd}\ncafile {ca}\ncertfile {cert}\nkeyfile {key}\n"
        "persistence false\n" + ("user root\n" if os.geteuid() == 0 else "")
    )
    proc = subprocess.Popen(
        [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert wait_listening("127.0.0.1", port, 10)
        yield port, ca
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _serve(port: int, *extra: str, password: str) -> subprocess.CompletedProcess[str]:
    # the password comes from the environment, as a service would pass it
    env = {**os.environ, PASSWORD_ENV: password}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "serve",
            "--quiet",
            "--broker",
            f"mqtts://127.0.0.1:{port}",
            "--job",
            "tls",
            "--max-time",
            "0.3",
            "--json",
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_serve_connects_with_tls_and_password(tls_broker: tuple[int, Path]) -> None:
    port, ca = tls_broker

    done = _serve(port, "--tls-ca", str(ca), "--username", "edge", password="s3cret")

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["stop_reason"] == "max_time"


def test_wrong_password_is_refused_clearly(tls_broker: tuple[int, Path]) -> None:
    port, ca = tls_broker

    done = _serve(port, "--tls-ca", str(ca), "--username", "edge", password="nope")

    assert done.returncode == 2
    assert "refused" in done.stderr and "Traceback" not in done.stderr


def test_untrusted_certificate_is_refused(tls_broker: tuple[int, Path]) -> None:
    port, _ = tls_broker

    done = _serve(port, "--username", "edge", password="s3cret")

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
