"""Liveness under an inbox backlog: silence counts only up to what was heard.

A worker whose heartbeat still waits in serve's inbox is not silent. The
inbox keeps each message's arrival time; the coordinator's Tick says up to
when everything has been handled (``heard_until``) and the core counts
silence up to there, not up to now.
"""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.registry import WorkerState
from edgeps.core.types import Heartbeat, Tick, WorkerLeft
from edgeps.policy import parse_policy
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps.transport.inbox import Inbox
from edgeps_worker import wire_host as wire

from tests.core.test_server import Worker, make_server


def test_a_worker_heard_before_the_backlog_is_not_timed_out() -> None:
    ps = make_server("asp", liveness_timeout=10.0)
    Worker(ps, "a")  # heard at 0.0
    # at 15 s, the inbox's oldest message arrived at 9 s: all before 9 s is handled
    assert ps.handle(Tick(heard_until=9.0), 15.0) == []
    assert ps.worker_state("a") is WorkerState.SUSPECTED
    # its heartbeat was in the backlog: taken now, it is live again
    ps.handle(Heartbeat("a"), 15.5)
    assert ps.worker_state("a") is WorkerState.LIVE


def test_silence_past_the_timeout_up_to_heard_until_still_kills() -> None:
    ps = make_server("asp", liveness_timeout=10.0)
    Worker(ps, "a")
    assert ps.handle(Tick(heard_until=10.5), 30.0) == [WorkerLeft("a", "timeout")]
    assert ps.worker_state("a") is WorkerState.DEAD


def test_heard_until_in_the_future_counts_as_now() -> None:
    ps = make_server("asp", liveness_timeout=10.0)
    Worker(ps, "a")
    assert ps.handle(Tick(heard_until=99.0), 5.0) == []
    assert ps.worker_state("a") is WorkerState.LIVE


def test_tick_without_heard_until_counts_to_now() -> None:
    ps = make_server("asp", liveness_timeout=10.0)
    Worker(ps, "a")
    assert ps.handle(Tick(), 10.5) == [WorkerLeft("a", "timeout")]


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_heard_until_must_be_finite(bad: float) -> None:
    ps = make_server("asp")
    with pytest.raises(ValueError):
        ps.handle(Tick(heard_until=bad), 1.0)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_inbox_reports_the_age_of_its_oldest_message() -> None:
    clock = Clock()
    box = Inbox(2, 1000, clock)
    assert box.oldest_age() == 0.0
    clock.t = 1.0
    assert box.put(("a", b"x"))
    clock.t = 3.0
    assert box.put(("b", b"y"))
    clock.t = 4.0
    assert not box.put(("c", b"z"))  # full: refused, not timed
    clock.t = 5.0
    assert box.oldest_age() == 4.0
    assert box.get(None) == ("a", b"x")
    assert box.oldest_age() == 2.0
    assert box.get(None) == ("b", b"y")
    assert box.oldest_age() == 0.0 and box.get(None) is None


def test_inbox_refused_for_bytes_keeps_times_in_step() -> None:
    clock = Clock()
    box = Inbox(10, 4, clock)
    assert box.put(("a", b"abc"))
    clock.t = 2.0
    assert not box.put(("b", b"de"))  # over 4 bytes held
    assert box.get(None) == ("a", b"abc")
    assert box.put(("c", b"de"))
    clock.t = 3.0
    assert box.oldest_age() == 1.0


class BackloggedLink:
    """A link whose inbox is the real Inbox, on a clock the test sets."""

    def __init__(self, clock: Clock) -> None:
        self.inbox = Inbox(100, 1 << 20, clock)
        self.sent: list[str] = []

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        return self.inbox.get(None)

    def get_nowait(self) -> tuple[str, bytes] | None:
        return self.inbox.get(None)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        self.sent.append(topic)


@pytest.mark.parametrize("backlog", [True, False])
def test_coordinator_tick_counts_silence_up_to_the_inbox_backlog(backlog: bool) -> None:
    clock = Clock()
    link = BackloggedLink(clock)
    server = ParameterServer(
        np.zeros(4, np.float32), policy=parse_policy("asp"), liveness_timeout=10.0
    )
    coord = Coordinator(
        server, link, Settings(job="jb", model="linear:3"), policy_name="asp"
    )
    up = wire.topic_up("jb", "w1")
    coord.handle(up, wire.encode_hello("jb", "w1", 1, 1), 0.0)
    session = coord.peers.get("w1").session
    beat = wire.encode_heartbeat("jb", "w1", session, 0)
    if backlog:
        clock.t = 8.0  # its heartbeat arrives at 8 s and waits in the inbox
        assert link.inbox.put((up, beat))
    clock.t = 15.0
    coord.tick(15.0)
    if not backlog:  # nothing heard since 0 s: timed out at 15 s
        assert server.worker_state("w1") is WorkerState.DEAD
        return
    assert server.worker_state("w1") is WorkerState.SUSPECTED
    item = link.get_nowait()
    assert item is not None
    coord.handle(*item, 15.0)
    assert server.worker_state("w1") is WorkerState.LIVE
