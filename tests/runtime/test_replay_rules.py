"""What replayed or forged traffic cannot do to a worker, at the coordinator.

Pure logic against the real ParameterServer and a recording link: an ended
link's HELLO is a replay, a REJECT goes only to the session that sent the
refused push, and a foreign retained MODEL is replaced by the PS's own.
"""

from __future__ import annotations

from edgeps.core.types import WorkerState
from edgeps_worker import wire_host as wire

from tests.runtime.test_coordinator import JOB, N, _coordinator, _grad


def _update(session: int, seq: int) -> list[bytearray]:
    return wire.encode_update(
        JOB, "w1", session, seq, seq, 0, 0.01, 8, 0.3, _grad(1.0), max_chunk=4096
    )


def test_a_dead_links_hello_and_heartbeats_never_revive_the_worker() -> None:
    # Prepare: w1 joined on link 100 and that link's last will fired
    coord, _ = _coordinator("bsp")
    up = wire.topic_up(JOB, "w1")
    hello = wire.encode_hello(JOB, "w1", 5, 100)
    coord.handle(up, hello, 0.0)
    session = coord.peers.get("w1").session
    beat = wire.encode_heartbeat(JOB, "w1", session, 0)
    coord.handle(up, wire.encode_bye(JOB, "w1", 100, "lost"), 1.0)
    assert coord.server.worker_state("w1") is WorkerState.DEAD
    # Execute: the captured HELLO and HEARTBEAT are replayed
    coord.handle(up, hello, 2.0)
    for t in range(5):
        coord.handle(up, beat, 3.0 + t)
    # Assert
    assert coord.server.worker_state("w1") is WorkerState.DEAD, (
        "HELD: a replayed HELLO revived a worker whose last will fired"
    )
    assert coord.ingest.dropped["replay"] == 1
    # the worker itself comes back on a new link
    coord.handle(up, wire.encode_hello(JOB, "w1", 5, 101), 9.0)
    assert coord.server.worker_state("w1") is WorkerState.LIVE


def test_a_reject_goes_only_to_the_session_that_pushed() -> None:
    # Prepare: w1's first link pushed once, then it reconnected (new session)
    coord, link = _coordinator("asp")
    up, down = wire.topic_up(JOB, "w1"), wire.topic_down(JOB, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 5, 100), 0.0)
    old = coord.peers.get("w1").session
    old_push = _update(old, 1)
    for part in old_push:
        coord.handle(up, part, 0.1)
    coord.handle(up, wire.encode_hello(JOB, "w1", 5, 101), 0.2)
    live = coord.peers.get("w1").session
    assert live != old
    link.sent.clear()
    # Execute: the old session's push is replayed
    for part in old_push:
        coord.handle(up, part, 0.3)
    # Assert: its REJECT names the old session, never the live one
    rejects = [m for m in link.decoded(down) if m.type == wire.REJECT]
    assert rejects, "a refused push is still answered"
    assert all(m.session == old for m in rejects), (
        "HELD: a replayed push sent the live session a REJECT"
    )


def test_a_foreign_retained_model_is_replaced_by_ours() -> None:
    # Prepare: serve published its MODEL
    coord, link = _coordinator("asp")
    topic = wire.topic_model(JOB)
    coord.publish_model("running")
    ours = link.sent[-1][1]
    forged = bytes(wire.encode_model(JOB, coord.run_id, "done", "", 0, N))
    link.sent.clear()
    t = coord.clock()  # the time serve published it
    # Execute: a forged MODEL done is retained, our echo arrives, then another
    coord.handle(topic, forged, t + 1.0)
    coord.handle(topic, ours, t + 1.01)
    coord.handle(topic, forged, t + 1.1)
    first = list(link.sent)
    coord.tick(t + 1.0 + coord.model_guard.min_gap + 0.01)
    # Assert: ours back at once, and again once the gap passed; each counted
    assert first == [(topic, ours, 1, True)], "HELD: a forged MODEL stayed retained"
    assert link.sent[-1] == (topic, ours, 1, True)
    assert coord.model_guard.replaced == 2
    assert coord.ingest.dropped["foreign_model"] == 2
