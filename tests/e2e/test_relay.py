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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from edgeps.core.types import WorkerState
from edgeps.emulate.emulation import Emulation
from edgeps.relay import Relay, RelayConfig, RelaySummary
from edgeps.relay.bridge import start_bridged_mosquitto
from edgeps.runtime.config import merge
from edgeps.runtime.job import Job
from edgeps.runtime.summary import Summary
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


@pytest.mark.slow
def test_a_relay_folds_its_boards_local_rounds_into_one_delta(mosquitto: Any) -> None:
    # Arrange: central FedAvg over local rounds of 4 steps; one relay (site
    # BSP, its site job on the same broker) and emulated sensors behind it
    cfg = merge(
        {
            "broker": mosquitto.url,
            "job": "fedjob",
            "policy": "fedavg",
            "local_steps": 4,
            "target_accuracy": TARGET,
            "max_time": 60.0,
            "quiet": True,
            "seed": 2,
        }
    )
    job = Job(cfg, broker=open_broker(mosquitto.url))
    result: dict[str, Summary] = {}
    host = threading.Thread(target=lambda: result.update(s=job.run()))
    host.start()
    out: dict[str, RelaySummary] = {}
    relay = Relay(
        RelayConfig(
            central=ConnectionOptions(broker=mosquitto.url),
            site=ConnectionOptions(broker=mosquitto.url),
            job="fedjob",
            relay_id="relay-l",
            site_job="site-l",
        )
    )
    thread = threading.Thread(target=lambda: out.update(r=relay.run()))
    emu: Emulation | None = None
    try:
        assert job.ready.wait(20)
        thread.start()
        assert relay.ready.wait(30), "the relay did not start its site"
        emu = Emulation(
            mosquitto.url, "site-l", seed=5, duration=90.0, n_workers=BOARDS
        ).start()

        # Execute: until serve reaches the target (or its time limit)
        host.join(90)
    finally:
        job.stop()
        host.join(10)
        thread.join(30)  # the central job's STOP ends the relay by itself
        relay.stop()
        thread.join(30)
        if emu is not None:
            emu.stop()
            emu.join(20)

    # Assert: the central host applied the relay's deltas, refusing none
    summary = result["s"]
    assert not host.is_alive() and not thread.is_alive()
    assert summary.stop_reason == "target_accuracy"
    assert summary.accuracy is not None and summary.accuracy >= TARGET
    assert set(summary.workers) == {"relay-l"}
    assert summary.workers["relay-l"]["accepted"] > 0
    assert summary.dropped == {}  # no "steps": the job takes deltas
    up = out["r"].upstream
    assert up["local"] is not None and up["local"][0] == 4  # handed to the site
    assert up["delta_rounds"] >= summary.workers["relay-l"]["accepted"]
    site = out["r"].site
    assert site is not None and site.dropped == {}  # the site took deltas too
    boards = site.workers
    assert set(boards) == {f"w{i:02d}" for i in range(BOARDS)}
    assert all(b["accepted"] > 0 for b in boards.values())


@contextmanager
def _lone_relay(
    mosquitto: Any, job_id: str, liveness: float, **relay: Any
) -> Iterator[tuple[Job, Relay]]:
    """Serve on the central broker and one bridged relay whose site has no boards."""
    cfg = merge(
        {
            "broker": mosquitto.url,
            "job": job_id,
            "policy": "asp",
            "max_time": 60.0,
            "liveness_timeout": liveness,
            "quiet": True,
        }
    )
    job = Job(cfg, broker=open_broker(mosquitto.url))
    host = threading.Thread(target=job.run)
    host.start()
    broker = None
    thread = None
    try:
        assert job.ready.wait(20)
        central = BrokerAddress("127.0.0.1", mosquitto.port)
        broker = start_bridged_mosquitto("w", central, job_id, "relay-w")
        relay_ = Relay(
            RelayConfig(
                central=ConnectionOptions(broker=broker.url),
                site=ConnectionOptions(broker=broker.url),
                job=job_id,
                relay_id="relay-w",
                site_job="site-w",
                **relay,
            )
        )
        thread = threading.Thread(target=relay_.run)
        thread.start()
        assert relay_.ready.wait(30)  # joined upstream, serving its (empty) site
        assert job.coordinator is not None
        assert job.coordinator.server.worker_state("relay-w") == WorkerState.LIVE
        yield job, relay_
    finally:
        if thread is not None:
            relay_.stop()
            thread.join(30)
        job.stop()
        host.join(15)
        if broker is not None:
            broker.close()


def test_a_relays_last_will_crosses_the_bridge(mosquitto: Any) -> None:
    # serve would wait a minute before timing the relay out
    with _lone_relay(mosquitto, "willjob", 60.0) as (job, relay):
        server = job.coordinator.server  # type: ignore[union-attr]

        # Execute: the relay's upstream link drops as in a crash
        relay.worker.t.abort()

        # Assert: the site broker's last will reached serve through the bridge
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if server.worker_state("relay-w") == WorkerState.DEAD:
                break
            time.sleep(0.1)
        assert server.worker_state("relay-w") == WorkerState.DEAD


def test_a_relay_waiting_for_its_round_stays_alive_upstream(mosquitto: Any) -> None:
    # no board ever pushes: the relay waits in its round, silent but for its
    # heartbeats, for twice serve's liveness timeout
    with _lone_relay(mosquitto, "beatjob", 1.5, heartbeat_ms=300) as (job, relay):
        server = job.coordinator.server  # type: ignore[union-attr]
        time.sleep(3.0)

        assert server.worker_state("relay-w") == WorkerState.LIVE
        assert relay.trainer is not None and relay.trainer.round.count == 0
        assert relay._beats[0] >= 5
