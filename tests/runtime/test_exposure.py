"""Secure by default: the decision whether a job needs per-device keys to start."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from edgeps.runtime.config import ServeConfig
from edgeps.runtime.exposure import check_keys, exposed_broker, is_loopback


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost", "LOCALHOST."]
)
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize(
    "host", ["", "0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "broker.lan", "example"]
)
def test_hosts_other_machines_may_reach(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("broker", "listen", "exposed"),
    [
        ("auto", None, None),
        ("amqtt", None, None),
        ("mqtt://127.0.0.1:1883", None, None),
        ("mqtt://localhost:1883,mqtt://127.0.0.2:1884", None, None),
        ("mqtt://192.168.1.20:1883", None, "mqtt://192.168.1.20:1883"),
        (
            "mqtt://127.0.0.1:1883,mqtt://broker.lan:1883",
            None,
            "mqtt://broker.lan:1883",
        ),
        ("mqtts://broker.lan", None, "mqtts://broker.lan:8883"),
        ("auto", "127.0.0.1:1883", None),
        ("auto", "0.0.0.0:1883", "0.0.0.0:1883 (--listen)"),
        ("auto", ":1883", "*:1883 (--listen)"),
    ],
)
def test_where_the_broker_is_reachable_from_other_machines(
    broker: str, listen: str | None, exposed: str | None
) -> None:
    assert exposed_broker(ServeConfig(broker=broker, listen=listen)) == exposed


def test_an_exposed_broker_without_keys_is_refused_with_what_to_do() -> None:
    with pytest.raises(ValueError) as err:
        check_keys(ServeConfig(broker="mqtt://10.1.2.3:1883"))
    text = str(err.value)
    assert "--hmac-key-file" in text and "--allow-unsigned" in text and "\n" not in text


def test_keys_or_allow_unsigned_let_an_exposed_broker_run() -> None:
    check_keys(ServeConfig(broker="mqtt://10.1.2.3:1883", hmac_key_file="m.key"))
    check_keys(ServeConfig(broker="mqtt://10.1.2.3:1883", allow_unsigned=True))
    check_keys(ServeConfig(broker="mqtt://127.0.0.1:1883"))  # loopback: nothing


def own_address() -> str | None:
    """This machine's address on its outbound interface, when it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # UDP: nothing is sent
        except OSError:
            return None
        host = str(s.getsockname()[0])
    return None if is_loopback(host) else host


def test_serve_refuses_an_exposed_broker_without_keys_in_one_line() -> None:
    # Prepare: something that accepts connections on a non-loopback address
    # (a broker's reachability is checked first: a typo is not a key problem)
    host = own_address()
    if host is None:
        pytest.skip("no non-loopback address on this machine")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind((host, 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        # Execute
        done = subprocess.run(
            [sys.executable, "-m", "edgeps", "serve", "--broker",
             f"mqtt://{host}:{port}", "--job", "lab", "--max-time", "1"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    # Assert
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--hmac-key-file" in lines[0], done.stderr
