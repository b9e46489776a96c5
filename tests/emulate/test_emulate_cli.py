"""`edgeps emulate` on the command line: a broker it cannot reach is one line."""

from __future__ import annotations

import pytest
from edgeps.cli import main

from tests.conftest import free_port


def test_emulate_against_an_unreachable_broker_is_one_line_and_exit_2(capsys):
    # Prepare: a port nothing listens on
    url = f"mqtt://127.0.0.1:{free_port()}"
    # Execute
    code = main(["emulate", "--broker", url, "--job", "lab", "--workers", "2",
                 "--max-time", "5"])  # fmt: skip
    # Assert: no empty table, one line naming the broker
    captured = capsys.readouterr()
    assert code == 2 and not captured.out
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"edgeps emulate: error: cannot reach the broker at {url}: ")


@pytest.mark.integration
def test_emulate_reaches_a_listening_broker(mosquitto):
    # a real broker passes the check: the sensors start and wait for the job
    from edgeps.transport.options import ConnectionOptions, probe_broker

    probe_broker(ConnectionOptions(broker=f"mqtt://127.0.0.1:{mosquitto.port}"))
