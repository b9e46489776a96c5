"""`edgeps relay` as a process: it starts its own site broker and ends with the job.

Serve runs on a real mosquitto (the central broker), the relay command
starts a site mosquitto (``--site-broker auto``) and says where; emulated
sensors join the site job there. When serve reaches its target, its STOP
ends the relay, which stops its boards and prints its JSON summary.
"""

from __future__ import annotations

import argparse
import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from edgeps.commands.relay import build_config
from edgeps.emulate.emulation import Emulation
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
from edgeps.security.keys import derive_worker_key
from edgeps.transport.broker import open_broker

JOB = "clijob"


def _lines(stream: Any, out: queue.Queue[str]) -> None:
    for line in stream:
        out.put(line)


@pytest.mark.integration
def test_the_relay_command_serves_a_site_and_ends_with_the_job(mosquitto: Any) -> None:
    cfg = merge(
        {
            "broker": mosquitto.url,
            "job": JOB,
            "policy": "asp",
            "target_accuracy": 0.8,
            "max_time": 60.0,
            "quiet": True,
            "seed": 2,
        }
    )
    job = Job(cfg, broker=open_broker(mosquitto.url))
    result: dict[str, Summary] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    assert job.ready.wait(20)
    cmd = [sys.executable, "-m", "edgeps", "relay", "--broker", mosquitto.url]
    cmd += ["--job", JOB, "--id", "r1", "--site-job", "s1", "--site-broker", "auto"]
    proc = subprocess.Popen(
        [*cmd, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    errors: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stderr, errors), daemon=True)
    reader.start()
    emu = None
    try:
        url = None
        while url is None:
            line = errors.get(timeout=30)
            found = re.search(r"site job s1 on (mqtt://[0-9.]+:[0-9]+)", line)
            url = found.group(1) if found else None
        emu = Emulation(url, "s1", seed=3, duration=90.0, n_workers=2).start()
        host.join(90)
        out, _ = proc.communicate(timeout=40)
    finally:
        job.stop()
        host.join(10)
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        if emu is not None:
            emu.stop()
            emu.join(20)

    summary = result["s"]
    assert summary.stop_reason == "target_accuracy"
    assert set(summary.workers) == {"r1"}
    assert proc.returncode == 0
    relay = json.loads(out)
    assert relay["relay_id"] == "r1" and relay["stop_reason"] == "done"
    assert set(relay["site"]["workers"]) == {"w00", "w01"}
    assert relay["upstream"]["rounds"] >= summary.workers["r1"]["accepted"] > 0
    # the boards were told the job is over
    assert emu is not None and all(
        r.stop_reason == "done" for r in emu.reports.values()
    )


def test_keys_the_relay_own_central_key_and_the_site_master(tmp_path: Path) -> None:
    from edgeps.commands.relay import configure
    from edgeps.security.keys import write_key_file

    central_master = bytes(range(32))
    site_master = bytes(range(32, 64))
    own = tmp_path / "r1.key"
    write_key_file(own, derive_worker_key(central_master, "r1"), worker_id="r1")
    site = tmp_path / "site.key"
    write_key_file(site, site_master)
    p = argparse.ArgumentParser()
    configure(p)
    base = ["--broker", "mqtt://127.0.0.1:1", "--job", "j", "--id", "r1"]

    args = p.parse_args([*base, "--hmac-key-file", str(own)])
    args.site_hmac_key_file = str(site)
    got = build_config(args)

    assert got.central_key == derive_worker_key(central_master, "r1")
    assert got.site_key == site_master
    with pytest.raises(ValueError):  # another worker's key is refused
        build_config(p.parse_args([*base[:-1], "r2", "--hmac-key-file", str(own)]))


def test_balance_is_off_unless_asked_and_reaches_the_relay_config() -> None:
    from edgeps.commands.relay import configure

    p = argparse.ArgumentParser()
    configure(p)
    base = ["--broker", "mqtt://127.0.0.1:1", "--job", "j", "--id", "r1"]

    assert build_config(p.parse_args(base)).balance is False
    assert build_config(p.parse_args([*base, "--balance"])).balance is True
