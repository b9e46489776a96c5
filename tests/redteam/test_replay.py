"""Replayed HELLOs and pushes revive and churn no worker (a real mosquitto, no ACLs).

Observed before: after a worker's link died and its last will marked it
dead, its captured HELLO was accepted as the same link and session, and BSP
waited on the revived worker; and REJECTs answering replayed old traffic
went to the live session, which then said HELLO again.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from edgeps.core.types import WorkerState
from edgeps.workloads.scenarios import WorkerProfile
from edgeps_worker import wire_host as wire

from tests.e2e.test_hostile_clients import JOB, MASTER, Run, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def keyed_run(mosquitto: Any, tmp_path: Any, victim: WorkerProfile) -> Run:
    key_file = tmp_path / "master.key"
    key_file.write_bytes(MASTER)
    key_file.chmod(0o600)
    profiles = {
        "c0": WorkerProfile(compute_time=0.02),
        "c1": WorkerProfile(compute_time=0.02),
        "victim": victim,
    }
    return Run(mosquitto, "bsp", 3, key_file=str(key_file), hmac_key=MASTER,
               profiles=profiles)  # fmt: skip


def sent_by(run: Run, wid: str, mtype: int) -> list[bytes]:
    topic = wire.topic_up(JOB, wid)
    with run.intruder.lock:
        raw = [p for t, p in run.intruder.raw if t == topic]
    return [p for p in raw if wire.decode(p).type == mtype]


def test_a_replayed_hello_never_revives_a_dead_worker(
    mosquitto: Any, tmp_path: Any
) -> None:
    # Prepare: the victim's link dies (its last will fires) and it never returns
    run = keyed_run(mosquitto, tmp_path, WorkerProfile(compute_time=0.02, crash_at=2.0))
    states: list[Any] = []
    try:
        state = lambda: run.coord.server.worker_state("victim")  # noqa: E731
        assert wait_until(lambda: bool(sent_by(run, "victim", wire.BYE)))
        assert wait_until(lambda: state() is WorkerState.DEAD)
        hello = sent_by(run, "victim", wire.HELLO)[-1]
        beats = sent_by(run, "victim", wire.HEARTBEAT)[-1:]
        before = {w: run.accepted(w) for w in ("c0", "c1")}
        # Execute: its HELLO (and any heartbeat) replayed for 5 s
        up = wire.topic_up(JOB, "victim")
        for _ in range(10):
            for payload in [hello, *beats]:
                run.intruder.publish(up, payload)
            states.append(state())
            time.sleep(0.5)
        went_on = wait_until(
            lambda: all(run.accepted(w) >= before[w] + 5 for w in before)
        )
        replays = run.coord.ingest.dropped["replay"]
    finally:
        run.finish()

    # Assert
    revived = [s for s in states if s is not WorkerState.DEAD]
    assert not revived, f"NOT HELD: a replayed HELLO revived the dead worker {states}"
    assert replays >= 10, (
        f"NOT HELD: replayed HELLOs not refused as replays ({replays})"
    )
    assert went_on, "NOT HELD: BSP waited on the dead worker"
    print("HELD: a dead worker's replayed HELLO is a replay; BSP went on")


def test_a_reject_of_replayed_old_pushes_reaches_no_live_session(
    mosquitto: Any, tmp_path: Any
) -> None:
    # Prepare: the victim's first life pushed, crashed and rejoined
    victim = WorkerProfile(compute_time=0.02, crash_at=1.5, rejoin_at=2.0)
    run = keyed_run(mosquitto, tmp_path, victim)
    try:
        assert wait_until(lambda: run.emu.reports["victim"].lives == 2)
        old = [wire.decode(p) for p in sent_by(run, "victim", wire.UPDATE)][0].session
        old_push = [
            p for p in sent_by(run, "victim", wire.UPDATE)
            if wire.decode(p).session == old
        ][-4:]  # fmt: skip
        assert wait_until(lambda: run.coord.peers.get("victim").session != old)
        live = run.coord.peers.get("victim").session
        first = run.accepted("victim")
        assert wait_until(lambda: run.accepted("victim") >= first + 3)
        down = wire.topic_down(JOB, "victim")
        with run.intruder.lock:
            seen = len(run.intruder.raw)
        # Execute: the old life's pushes are replayed 20 times
        up = wire.topic_up(JOB, "victim")
        for _ in range(20):
            for payload in old_push:
                run.intruder.publish(up, payload)
        more = run.accepted("victim")
        went_on = wait_until(lambda: run.accepted("victim") >= more + 5)
        with run.intruder.lock:
            later = [p for t, p in run.intruder.raw[seen:] if t == down]
    finally:
        run.finish()

    # Assert: every REJECT names the old session; the live one trains on
    rejects = [m for m in map(wire.decode, later) if m.type == wire.REJECT]
    assert rejects, "the replayed pushes are still answered"
    to_live = [m.reason for m in rejects if m.session == live]
    assert not to_live, f"NOT HELD: REJECTs sent to the live session: {to_live}"
    assert all(m.session == old for m in rejects)
    assert went_on, "NOT HELD: the live session stopped training"
    print(f"HELD: {len(rejects)} REJECTs went to the old session only")
