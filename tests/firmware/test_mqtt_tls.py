"""The board's MQTT client over TLS: a mosquitto with a TLS listener and a test CA."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import ModelSpec
from edgeps_worker import datafile

from tests.conftest import (
    FIRMWARE,
    _wait_listening,
    free_port,
    mosquitto_path,
    run_micropython,
)
from tests.helpers.fw_host import (
    MiniPS,
    finish_worker,
    start_worker,
    write_worker_config,
)
from tests.helpers.tls_certs import make_certs

pytestmark = pytest.mark.integration
SCRIPT = str(Path(__file__).parents[1] / "helpers" / "mpy" / "mqtt_tls.py")


@dataclass
class TLSBroker:
    plain_port: int  # anonymous, for the test's own parameter server
    tls_port: int  # TLS and user "edge" / "s3cret"
    ca: Path


@pytest.fixture
def tls_broker(tmp_path: Path) -> Iterator[TLSBroker]:
    exe = mosquitto_path()
    if exe is None or shutil.which("openssl") is None:
        pytest.fail("needs mosquitto and openssl")
    ca, cert, key = make_certs(tmp_path, "IP:127.0.0.1,DNS:localhost")
    passwd = tmp_path / "passwd"
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(passwd), "edge", "s3cret"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    plain, tls = free_port(), free_port()
    conf = tmp_path / "tls.conf"
    conf.write_text(
        "per_listener_settings true\npersistence false\n"
        f"listener {plain} 127.0.0.1\nallow_anonymous true\n"
        f"listener {tls} 127.0.0.1\nallow_anonymous false\npassword_file {passwd}\n"
        f"cafile {ca}\ncertfile {cert}\nkeyfile {key}\n"
        # as root, mosquitto would drop to a user that cannot read tmp_path
        + ("user root\n" if os.geteuid() == 0 else "")
    )
    proc = subprocess.Popen(
        [exe, "-c", str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        assert _wait_listening(plain, 10) and _wait_listening(tls, 10)
        yield TLSBroker(plain, tls, ca)
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _client(exe: str, broker: TLSBroker, hostname: str, password: str = "s3cret"):
    args = (str(broker.tls_port), str(broker.ca), hostname, "edge", password)
    if exe == "cpython":
        env = dict(os.environ, PYTHONPATH=str(FIRMWARE))
        return subprocess.run(
            [sys.executable, SCRIPT, *args], capture_output=True, text=True,
            timeout=60, env=env, cwd=FIRMWARE,
        )  # fmt: skip
    return run_micropython(exe, SCRIPT, *args)


@pytest.mark.firmware
@pytest.mark.parametrize("hostname", ["127.0.0.1", "localhost"])
def test_micropython_round_trip_over_tls(micropython, tls_broker, hostname):
    proc = _client(micropython, tls_broker, hostname)
    assert proc.stdout.strip() == "ok tls", proc.stdout + proc.stderr


def test_cpython_round_trip_over_tls(tls_broker):
    proc = _client("cpython", tls_broker, "127.0.0.1")
    assert proc.stdout.strip() == "ok tls", proc.stdout + proc.stderr


@pytest.mark.firmware
def test_a_certificate_for_another_name_is_refused(micropython, tls_broker):
    proc = _client(micropython, tls_broker, "broker.example")
    assert proc.stdout.startswith("refused TLS:"), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.firmware
def test_a_wrong_password_is_refused_over_tls(micropython, tls_broker):
    proc = _client(micropython, tls_broker, "127.0.0.1", password="nope")
    assert proc.stdout.strip().startswith("refused broker refused"), proc.stdout


@pytest.mark.firmware
def test_board_worker_trains_over_tls(micropython, tls_broker, tmp_path):
    # Prepare: the PS on the plain listener, the board on the TLS one
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 8)).astype(np.float32)
    datafile.write_file(
        str(tmp_path / "data.bin"), X.tolist(), [int(v > 0) for v in X[:, 0]]
    )
    cfg = write_worker_config(
        tmp_path, tls_broker.tls_port, max_iterations=3, username="edge",
        password="s3cret", tls_ca=str(tls_broker.ca), tls_hostname="localhost",
    )  # fmt: skip
    spec = ModelSpec.parse("mlp:8-6-3")
    ps = MiniPS(tls_broker.plain_port, "fwjob", "mlp:8-6-3", spec.init_params(1))
    ps.start()
    try:
        # Execute
        proc = start_worker(micropython, cfg, limit_ms=60000)
        report, out = finish_worker(proc, timeout=90)
    finally:
        ps.stop()

    # Assert
    assert report["reason"] == "iterations", out
    assert [u.seq for u in ps.updates] == [1, 2, 3]
    assert report["stats"]["reconnects"] == 0
