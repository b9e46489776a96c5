"""Relays end to end: two site brokers bridged to a central mosquitto, serve on it.

Each site runs its own mosquitto, bridged to the central one for its relay's
three topics only (`edgeps.relay.bridge`), a relay connected to the site
broker alone, and emulated sensors (`Emulation`, as `edgeps emulate` runs
them) on the site job. Serve on the central broker must reach the target
while it hears only from the two relays.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from edgeps.commands.emulate import Emulation
from edgeps.commands.serve_config import merge
from edgeps.core.types import WorkerState
from edgeps.relay import Relay, RelayConfig, RelaySummary
from edgeps.relay.bridge import start_bridged_mosquitto
from edgeps.runtime.coordinator import Summary
from edgeps.runtime.job import Job
from edgeps.security.keys import derive_worker_key, new_master_key, write_key_file
from edgeps.transport.broker import BrokerAddress, BrokerHandle, open_broker
from edgeps.transport.options import ConnectionOptions

pytestmark = pytest.mark.integration

JOB = "central"
TARGET = 0.8
SITES = {"a": "bsp", "b": "kofn:k=2"}
BOARDS = 3


def test_two_bridged_sites_reach_the_target(mosquitto: Any, tmp_path: Path) -> None:
    # Arrange: serve on the central broker, with keys: the relay holds its own
    # central key and its site's master
    central_master, site_master = new_master_key(), new_master_key()
    write_key_file(tmp_path / "master.key", central_master)
    cfg = merge(
        {
            "broker": mosquitto.url,
            "job": JOB,
            "policy": "asp",
            "target_accuracy": TARGET,
            "max_time": 60.0,
            "quiet": True,
            "seed": 1,
            "hmac_key_file": str(tmp_path / "master.key"),
        }
    )
    job = Job(cfg, broker=open_broker(mosquitto.url))
    result: dict[str, Summary] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    brokers: list[BrokerHandle] = []
    relays: dict[str, Relay] = {}
    relay_out: dict[str, RelaySummary] = {}
    threads: list[threading.Thread] = []
    emus: list[Emulation] = []
    try:
        assert job.ready.wait(20)
        central = BrokerAddress("127.0.0.1", mosquitto.port)
        for i, (site, policy) in enumerate(SITES.items()):
            rid = f"relay-{site}"
            broker = start_bridged_mosquitto(site, central, JOB, rid)
            brokers.append(broker)
            relay = Relay(
                RelayConfig(
                    # the site broker only: the bridge carries the relay's topics
                    central=ConnectionOptions(broker=broker.url),
                    site=ConnectionOptions(broker=broker.url),
                    job=JOB,
                    relay_id=rid,
                    site_job=f"site-{site}",
                    policy=policy,
                    central_key=derive_worker_key(central_master, rid),
                    site_key=site_master,
                )
            )
            relays[site] = relay
            th = threading.Thread(
                target=lambda s=site, r=relay: relay_out.update({s: r.run()})
            )
            th.start()
            threads.append(th)
            assert relay.ready.wait(30), f"relay {rid} did not start its site"
            emus.append(
                Emulation(
                    broker.url,
                    f"site-{site}",
                    seed=10 + i,
                    duration=90.0,
                    n_workers=BOARDS,
                    hmac_key=site_master,
                ).start()
            )

        # Execute: until serve reaches the target (or its time limit)
        host.join(90)
    finally:
        job.stop()
        host.join(10)
        for th in threads:  # the central job's STOP ends each relay by itself
            th.join(30)
        for relay in relays.values():
            relay.stop()
        for th in threads:
            th.join(30)
        for emu in emus:
            emu.stop()
            emu.join(20)
        for broker in brokers:
            broker.close()

    # Assert: the central host saw two workers, the relays
    summary = result["s"]
    assert not host.is_alive()
    assert summary.stop_reason == "target_accuracy"
    assert summary.accuracy is not None and summary.accuracy >= TARGET
    assert set(summary.workers) == {"relay-a", "relay-b"}
    assert all(w["accepted"] > 0 for w in summary.workers.values())
    assert summary.dropped == {}  # every relay message was signed with its key
    for site, out in relay_out.items():
        assert out.stop_reason == "done", site  # the central job's STOP ended it
        up = out.upstream
        assert out.site is not None
        boards = out.site.workers
        assert set(boards) == {f"w{i:02d}" for i in range(BOARDS)}, site
        assert all(b["accepted"] > 0 for b in boards.values()), site
        assert out.site.dropped == {}, site  # and every board's, with its own
        # every applied board push went into exactly one round (the last one
        # may be left unsent when the job ends)
        applied = sum(b["accepted"] for b in boards.values())
        assert up["folded"] + up["unsent"] == applied, site
        assert up["rounds"] >= summary.workers[f"relay-{site}"]["accepted"], site
    # site BSP: every round holds each live board's gradient once
    a = relay_out["a"].upstream
    assert a["largest_round"] == BOARDS
    assert a["fan_in"] > 2.0
    assert a["late"] == 0


def test_a_relays_last_will_crosses_the_bridge(mosquitto: Any) -> None:
    # Arrange: serve that would wait a minute before timing the relay out
    cfg = merge(
        {
            "broker": mosquitto.url,
            "job": "willjob",
            "policy": "asp",
            "max_time": 60.0,
            "liveness_timeout": 60.0,
            "quiet": True,
        }
    )
    job = Job(cfg, broker=open_broker(mosquitto.url))
    host = threading.Thread(target=job.run)
    host.start()
    broker = None
    relay = None
    thread = None
    try:
        assert job.ready.wait(20)
        central = BrokerAddress("127.0.0.1", mosquitto.port)
        broker = start_bridged_mosquitto("w", central, "willjob", "relay-w")
        relay = Relay(
            RelayConfig(
                central=ConnectionOptions(broker=broker.url),
                site=ConnectionOptions(broker=broker.url),
                job="willjob",
                relay_id="relay-w",
                site_job="site-w",
            )
        )
        thread = threading.Thread(target=relay.run)
        thread.start()
        assert relay.ready.wait(30)  # joined upstream, serving its (empty) site
        coord = job.coordinator
        assert coord is not None
        assert coord.server.worker_state("relay-w") == WorkerState.LIVE

        # Execute: the relay's upstream link drops as in a crash
        relay.worker.t.abort()

        # Assert: the site broker's last will reached serve through the bridge
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if coord.server.worker_state("relay-w") == WorkerState.DEAD:
                break
            time.sleep(0.1)
        assert coord.server.worker_state("relay-w") == WorkerState.DEAD
    finally:
        if relay is not None:
            relay.stop()
        if thread is not None:
            thread.join(30)
        job.stop()
        host.join(15)
        if broker is not None:
            broker.close()
