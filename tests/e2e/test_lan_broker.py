"""`edgeps serve --lan`: the broker it starts lets in only the boards it wrote keys for.

The broker listens on 127.0.0.1 only (``--listen 127.0.0.1:PORT``): the setup
is the one serve makes for a LAN, bound where no other machine reaches it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from edgeps.transport.broker import wait_listening

from tests.conftest import free_port, mosquitto_path
from tests.helpers.acl_clients import RecordingClient
from tests.helpers.lan_dirs import lan_home  # noqa: F401 (a fixture)


def _worker(url: str, wid: str, job_dir: Path) -> subprocess.Popen[str]:
    creds = job_dir / "broker" / "credentials"
    return subprocess.Popen(
        [sys.executable, "-m", "edgeps", "worker", "--broker", url, "--job", "lan",
         "--id", wid, "--emulated", "sensors:0/2", "--username", wid,
         "--password-file", str(creds / f"{wid}.password"),
         "--hmac-key-file", str(job_dir / "keys" / f"{wid}.key")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.integration
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto is not installed")
def test_a_lan_job_trains_its_boards_and_refuses_anonymous_clients(
    lan_home: Path,  # noqa: F811
) -> None:
    # Prepare: serve starts its LAN broker (on loopback) for two boards
    port = free_port()
    job_dir = lan_home / "lan-job"
    url = f"mqtt://127.0.0.1:{port}"
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--lan", "--listen",
         f"127.0.0.1:{port}", "--boards", "w00,w01", "--job-dir", str(job_dir),
         "--job", "lan", "--policy", "asp", "--max-time", "8", "--json", "--quiet",
         "--target-accuracy", "0.999"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    procs = [serve]
    anonymous_in = None
    try:
        assert wait_listening("127.0.0.1", port, 30), "serve's broker did not start"
        procs += [_worker(url, "w00", job_dir), _worker(url, "w01", job_dir)]
        # Execute
        outsider = RecordingClient(port, None, None)
        anonymous_in = outsider.connect()
        outsider.close()
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
    # Assert: both boards trained through the ACLs, signed; no anonymous client
    assert serve.returncode == 0, err
    assert anonymous_in is False
    workers = json.loads(out_text)["workers"]
    assert workers["w00"]["accepted"] > 5, workers
    assert workers["w01"]["accepted"] > 5, workers
    assert "w00:" in err and "keys/w00.key" in err  # what to copy to each board
    assert not wait_listening("127.0.0.1", port, 0.5), "the broker outlived serve"
