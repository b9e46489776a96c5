"""A HELLO flood of made-up worker ids against a BSP job on a real mosquitto.

Without keys anyone on the broker can say HELLO under any id. 5,000 made-up
ids in a few seconds must cost the job bounded worker records and metrics,
and must not hold BSP: the 4 honest workers keep making rounds during the
flood and the job reaches its target.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest
from edgeps.core.admission import Admission
from edgeps.runtime.worker_rows import MAX_WORKER_ROWS
from edgeps_worker import wire_host as wire

from tests.conftest import Broker

JOB = "flood"
IDS = 5000
RATE = 2000.0  # HELLOs per second
HONEST = 4
MAX_RECORD_BYTES = 256 * 1024  # one metrics line; thousands of rows would pass it
WAIT = 60.0  # seconds, for every single wait below


def flood(port: int, sent: list[int]) -> None:
    """IDS distinct made-up ids say HELLO once each, unsigned, at RATE."""
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2, client_id=f"flood-{random.getrandbits(32)}"
    )
    client.max_queued_messages_set(0)
    client.connect("127.0.0.1", port, 30)
    client.loop_start()
    rnd = random.Random(7)
    t0 = time.monotonic()
    try:
        for i in range(IDS):
            wid = f"fake{i:05d}"
            hello = wire.encode_hello(
                JOB, wid, rnd.getrandbits(64), rnd.getrandbits(64)
            )
            client.publish(wire.topic_up(JOB, wid), bytes(hello), qos=0)
            sent[0] += 1
            ahead = (i + 1) / RATE - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
    finally:
        client.loop_stop()
        client.disconnect()


def records(path: Path) -> list[dict]:
    """The complete metrics lines written so far."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break  # the line being written
    return out


def updates_now(path: Path) -> int:
    rows = records(path)
    return int(rows[-1]["updates"]) if rows else 0


def wait_for(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + WAIT
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.integration
def test_a_hello_flood_keeps_records_bounded_and_bsp_moving(
    mosquitto: Broker, tmp_path: Path
) -> None:
    # Prepare: serve (BSP, no keys: loopback), 4 honest emulated sensors
    metrics = tmp_path / "m.jsonl"
    serve = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "serve", "--broker", mosquitto.url,
         "--job", JOB, "--policy", "bsp", "--liveness-timeout", "3",
         "--metrics-out", str(metrics), "--metrics-interval", "0.5",
         "--target-accuracy", "0.9", "--max-time", "90", "--json", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    emulate = subprocess.Popen(
        [sys.executable, "-m", "edgeps", "emulate", "--broker", mosquitto.url,
         "--job", JOB, "--workers", str(HONEST), "--max-time", "100"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    sent = [0]
    try:
        wait_for(lambda: updates_now(metrics) > 0, "the honest workers' first round")
        # Execute: the flood, while BSP runs
        before = updates_now(metrics)
        flooder = threading.Thread(target=flood, args=(mosquitto.port, sent))
        flooder.start()
        flooder.join(WAIT)
        time.sleep(1.0)  # one more metrics record
        during = updates_now(metrics) - before
        out, err = serve.communicate(timeout=120)
    finally:
        for p in (serve, emulate):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)

    # Assert: the flood happened, BSP kept going and reached its target
    assert sent[0] == IDS
    assert serve.returncode == 0, err
    summary = json.loads(out)
    assert during >= 4 * HONEST, (
        f"HELD: BSP made {during} updates while {IDS} made-up ids said HELLO"
    )
    assert summary["stop_reason"] == "target_accuracy", (
        f"HELD: BSP did not reach its target during the flood: {summary['stop_reason']}"
        f" after {summary['updates']} updates"
    )
    # records and metrics stay bounded: at most the joining cap plus the honest
    cap = Admission().max_joining + HONEST
    rows = records(metrics)
    assert rows
    for row in rows:
        held = len(row["workers"]) + row["workers_omitted"]["count"]
        assert len(row["workers"]) <= MAX_WORKER_ROWS, "HELD: unbounded metrics rows"
        assert held <= cap, f"HELD: {held} worker records kept (cap {cap})"
    sizes = [len(line) for line in metrics.read_text().splitlines()]
    assert max(sizes) <= MAX_RECORD_BYTES, f"HELD: a metrics record of {max(sizes)} B"
    assert len(summary["workers"]) <= MAX_WORKER_ROWS
    # past the cap (and the liveness timeout) made-up ids are forgotten
    assert summary["workers_forgotten"] > 0, "HELD: no made-up id was forgotten"
    honest = [w for w in summary["workers"].values() if w["accepted"] > 0]
    assert len(honest) == HONEST, summary["workers"].keys()
