"""Serve's side of bounded admission: forgotten ids leave no peer, rows stay few."""

from __future__ import annotations

import numpy as np
from edgeps.core import ParameterServer
from edgeps.core.admission import Admission
from edgeps.policy.bsp import BSP
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps_worker import wire_host as wire

from tests.runtime.test_coordinator import RecordingLink

JOB = "adm"
N = 10


def make_coordinator(**limits: int) -> Coordinator:
    server = ParameterServer(
        np.zeros(N, np.float32),
        policy=BSP(),
        liveness_timeout=2.0,
        admission=Admission(on_first_push=True, **limits),
    )
    settings = Settings(job=JOB, model=f"linear:{N - 1}", max_worker_rows=16)
    return Coordinator(server, RecordingLink(), settings, policy_name="bsp")


def hello(coord: Coordinator, wid: str, now: float) -> None:
    coord.handle(wire.topic_up(JOB, wid), wire.encode_hello(JOB, wid, 1, 1), now)


def test_ids_that_never_push_leave_no_peer_and_few_rows() -> None:
    # Prepare: 500 made-up ids say hello
    coord = make_coordinator(max_joining=100)
    for i in range(500):
        hello(coord, f"f{i:03d}", 0.001 * i)
    # Execute: a tick before and one after the liveness timeout
    coord.tick(1.0)
    during = coord.record(1.0)
    coord.tick(5.0)
    after = coord.record(5.0)
    # Assert: the cap held the core and the peers; after the timeout, nothing
    assert len(during["workers"]) == 16
    assert during["workers_omitted"]["count"] == 100 - 16
    assert during["workers_omitted"]["by_state"] == {"joining": 84}
    assert len(coord.peers) <= 100
    assert after["workers"] == {} and len(coord.peers) == 0
    assert after["workers_forgotten"] == 500


def test_an_id_back_before_the_tick_keeps_its_peer() -> None:
    coord = make_coordinator(max_joining=1)
    hello(coord, "a", 0.0)
    hello(coord, "b", 0.1)  # evicts a
    hello(coord, "a", 0.2)  # a is back (evicting b) before the runtime looks
    coord.tick(0.3)
    assert coord.peers.get("a").session != 0


def test_peers_of_ids_that_never_joined_are_capped() -> None:
    # Prepare: serve with keys; HELLOs signed with a wrong key never join
    server = ParameterServer(np.zeros(N, np.float32), policy=BSP())
    settings = Settings(job=JOB, model=f"linear:{N - 1}", hmac_key=b"k" * 32)
    coord = Coordinator(server, RecordingLink(), settings, policy_name="bsp")
    coord.peers.max_unjoined = 64
    # Execute
    for i in range(1000):
        wid = f"f{i:04d}"
        bad = wire.encode_hello(JOB, wid, 1, 1, key=b"x" * 32)
        coord.handle(wire.topic_up(JOB, wid), bad, 0.01 * i)
    # Assert: all dropped, and only the newest few of their peers are kept
    assert coord.ingest.dropped["hmac"] >= 1000
    assert len(coord.peers) <= 64


def test_what_a_forgotten_id_was_charged_moves_to_unknown() -> None:
    # Prepare: a joining id sends a malformed message, charged to it
    coord = make_coordinator()
    hello(coord, "junk", 0.0)
    coord.handle(wire.topic_up(JOB, "junk"), b"\x02garbage", 0.1)
    charged = coord.accounting.dropped_of("junk")
    assert sum(charged.values()) == 1
    # Execute: it is forgotten after the liveness timeout
    coord.tick(5.0)
    # Assert
    assert coord.accounting.dropped_of("junk") == {}
    assert coord.unknown()["dropped_by_reason"] == charged
