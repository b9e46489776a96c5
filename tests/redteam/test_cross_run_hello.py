"""A HELLO captured in an earlier run, replayed into a new one, holds no id.

Observed before: replayed every 2 s into a new run (per-device keys, no
ACLs), it kept the id joining and recently heard, and the real worker's new
process was refused as ``duplicate_id`` (exit 2). A HELLO carries no proof of
freshness: only a heartbeat or push in the session the host issued does.
"""

from __future__ import annotations

import numpy as np
from edgeps.core import ParameterServer
from edgeps.core.admission import Admission
from edgeps.core.types import Heartbeat, Join, Push, Rejected, Release, Tick
from edgeps.policy.bsp import BSP

from tests.redteam._held import held

TIMEOUT = 10.0
REPLAYED = dict(instance=0xA1, nonce=0x51)  # the earlier run's process and link


def new_run() -> ParameterServer:
    return ParameterServer(
        np.zeros(3, np.float32),
        policy=BSP(),
        liveness_timeout=TIMEOUT,
        admission=Admission(on_first_push=True),
    )


def replay(ps: ParameterServer, now: float) -> list[object]:
    """The captured HELLO again (the host gives each HELLO a fresh session)."""
    return ps.handle(Join("pi-1", int(now * 1000) + 7, **REPLAYED), now)


def test_a_replayed_hello_does_not_block_the_real_workers_new_process() -> None:
    # Prepare: a new run, the replay already flowing
    ps = new_run()
    replay(ps, 0.0)
    # Execute: the real worker's new process says hello, pushes, and the replay goes on
    answer = ps.handle(Join("pi-1", 900, instance=0xB2, nonce=0x77), 1.0)
    push = Push("pi-1", 1, 0, 0, np.zeros(3, np.float32), 0.01, 1, 900)
    ps.handle(push, 1.5)
    later = [replay(ps, t) for t in (2.0, 4.0, 6.0)]
    ps.handle(Heartbeat("pi-1", 1, session=900), 6.5)
    # Assert: the real one is welcomed and keeps its session; the replay is refused
    welcomed = any(isinstance(a, Release) for a in answer)
    refused = all(a == [Rejected("pi-1", 0, "duplicate_id")] for a in later)
    stats = ps.stats()["pi-1"]
    held(
        welcomed and refused and stats.accepted == 1,
        "a HELLO from an earlier run does not lock out the real worker",
        (answer, later, stats),
    )


def test_a_replayed_hello_does_not_keep_an_id_alive() -> None:
    # Prepare: a new run; nobody but the replayer speaks for pi-1
    ps = new_run()
    # Execute: the captured HELLO every 2 s for longer than the liveness timeout
    for i in range(8):
        replay(ps, 2.0 * i)
    ps.handle(Tick(), 2.0 * 7 + 0.5)
    # Assert: the id was forgotten a timeout after its first hello, replays or not
    held(
        ps.forgotten_total >= 1 and ps.worker_state("pi-1") is None,
        "a replayed HELLO refreshes no liveness",
        (ps.forgotten_total, ps.worker_state("pi-1")),
    )


def test_a_joining_worker_that_heartbeats_keeps_its_id() -> None:
    # Prepare: the real worker joined and proves its session by heartbeats
    ps = new_run()
    ps.handle(Join("pi-1", 900, instance=0xB2, nonce=0x77), 0.0)
    for t in (4.0, 8.0, 12.0):
        ps.handle(Heartbeat("pi-1", 0, session=900), t)
    # Execute: the earlier run's HELLO arrives, then a liveness pass
    refused = replay(ps, 13.0)
    ps.handle(Tick(), 14.0)
    # Assert: the holder stays; the replay is refused
    assert refused == [Rejected("pi-1", 0, "duplicate_id")]
    assert ps.worker_state("pi-1") is not None
