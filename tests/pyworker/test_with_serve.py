"""CPython workers (threads and processes) against the real `edgeps serve`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from edgeps.emulate.emulation import Emulation
from edgeps.workloads.scenarios import WorkerProfile


@pytest.mark.integration
def test_emulated_and_process_workers_train_with_the_coordinator(mosquitto) -> None:  # type: ignore[no-untyped-def]
    # Prepare: the host, one `edgeps worker` process and two emulated sensors
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", "e2e", "--policy", "bsp", "--max-time", "12", "--json",
         "--quiet", "--target-accuracy", "0.999"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
         "--job", "e2e", "--id", "pi-1", "--emulated", "sensors:2/3"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    fast = WorkerProfile(compute_time=0.05)
    emu = Emulation(mosquitto.url, "e2e", profiles={"s0": fast, "s1": fast})
    try:
        # Execute
        emu.start()
        out, err = serve.communicate(timeout=90)
        worker_code = proc.wait(timeout=30)
        ended = emu.join(timeout=30)
    finally:
        emu.stop()
        for p in (serve, proc):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert
    assert serve.returncode == 0, err
    summary = json.loads(out)
    assert worker_code == 0 and ended
    for wid in ("pi-1", "s0", "s1"):
        assert summary["workers"][wid]["accepted"] > 5, summary["workers"]
    # BSP: clocks of live workers differ by at most one round
    clocks = [summary["workers"][w]["clock"] for w in ("pi-1", "s0", "s1")]
    assert max(clocks) - min(clocks) <= 1
    assert emu.reports["s0"].stop_reason == "done"
    assert summary["accuracy"] > 0.3  # six classes: chance is 0.17


@pytest.mark.integration
def test_signed_job_trains_only_with_the_shared_key(mosquitto, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # Prepare: a host that signs and requires HMAC tags
    key = tmp_path / "job.key"
    key.write_text("a shared secret\n")
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", "sig", "--policy", "asp", "--max-time", "8", "--json",
         "--quiet", "--target-accuracy", "0.999", "--hmac-key-file", str(key)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
            "--job", "sig", "--emulated", "sensors:0/2"]  # fmt: skip
    signed = subprocess.Popen(
        [*base, "--id", "good", "--hmac-key-file", str(key)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    unsigned = subprocess.Popen(
        [*base, "--id", "nokey"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Execute
        out, err = serve.communicate(timeout=60)
        signed.wait(timeout=30)
    finally:
        for p in (serve, signed, unsigned):
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    # Assert
    assert serve.returncode == 0, err
    workers = json.loads(out)["workers"]
    assert workers["good"]["accepted"] > 5
    assert workers.get("nokey", {}).get("accepted", 0) == 0
    assert signed.returncode == 0


@pytest.mark.integration
def test_a_worker_with_another_key_says_the_job_does_not_answer(
    mosquitto, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    # Prepare: the host signs with one key, the worker holds another
    ours, theirs = tmp_path / "job.key", tmp_path / "other.key"
    ours.write_text("the job's secret\n")
    theirs.write_text("another master's secret\n")
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", "keyed", "--policy", "asp", "--max-time", "30", "--quiet",
         "--target-accuracy", "0.999", "--hmac-key-file", str(ours)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    worker = [sys.executable, "-m", "edgeps", "worker", "--broker", mosquitto.url,
              "--job", "keyed", "--id", "pi-1", "--emulated", "sensors:0/2",
              "--hmac-key-file", str(theirs), "--release-timeout", "1"]  # fmt: skip
    try:
        # Execute: the worker runs until the bound; it never gets an answer
        try:
            done = subprocess.run(worker, capture_output=True, text=True, timeout=12)
            err = done.stderr
        except subprocess.TimeoutExpired as exc:
            raw = exc.stderr or ""
            err = raw.decode() if isinstance(raw, bytes) else raw
    finally:
        serve.kill()
        serve.wait(timeout=10)
    # Assert: the line says what to check
    assert "no answer from the job: check the job id and the key (--hmac-key-file)" in (
        err
    ), err
