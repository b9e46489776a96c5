"""The event-loop emulator's pure scheduling, with fake time."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core.types import Push, Release
from edgeps.emulate.timers import SendQueue, Timers, spread
from edgeps.runtime.inbound import Inbound, percentiles


def test_timers_run_in_time_order_and_equal_times_in_call_order() -> None:
    # Prepare
    t = Timers()
    seen: list[str] = []
    t.at(2.0, lambda: seen.append("b"))
    t.at(1.0, lambda: seen.append("a"))
    t.at(2.0, lambda: seen.append("c"))
    t.at(5.0, lambda: seen.append("late"))

    # Execute
    ran = t.run_due(2.0)

    # Assert
    assert ran == 3 and seen == ["a", "b", "c"]
    assert t.next_at() == 5.0 and len(t) == 1
    assert t.run_due(4.999) == 0


def test_a_publish_during_compute_waits_for_its_end_plus_the_link_delay() -> None:
    # Prepare: the sensor computes from t=10 until t=10.9
    q = SendQueue()
    q.hold(10.9)

    # Execute
    at_update = q.add(10.0, 0.005, "up", b"UPDATE", 1, False)
    at_beat = q.add(10.1, 0.0, "up", b"HB", 1, False)

    # Assert: nothing is due before the hold ends; order is kept
    assert q.busy(10.5) and not q.busy(10.9)
    assert at_update == pytest.approx(10.905)
    assert at_beat == pytest.approx(10.905)  # never overtakes the UPDATE
    assert q.pop_due(10.9) == []
    due = q.pop_due(10.91)
    assert [h.payload for h in due] == [b"UPDATE", b"HB"]


def test_an_idle_link_without_delay_sends_at_once_but_never_overtakes() -> None:
    q = SendQueue()
    assert q.add(1.0, 0.0, "up", b"a", 1, False) is None
    assert q.add(1.0, 0.5, "up", b"b", 1, False) == pytest.approx(1.5)
    # no delay, but b still waits: c queues behind it
    assert q.add(1.1, 0.0, "up", b"c", 1, False) == pytest.approx(1.5)
    q.clear()
    assert q.add(1.2, 0.0, "up", b"d", 1, False) is None


def test_spread_ramps_starts_evenly() -> None:
    assert spread(4, 10.0, 2.0) == [10.0, 10.5, 11.0, 11.5]
    assert spread(3, 1.0, 0.0) == [1.0, 1.0, 1.0]
    assert spread(0, 1.0, 1.0) == []


def _push(wid: str, seq: int = 1) -> Push:
    return Push(wid, seq, seq, 0, np.zeros(2, dtype=np.float32))


def test_push_to_release_latency_counts_only_answered_pushes() -> None:
    # Prepare
    inb = Inbound()
    params = np.zeros(2, dtype=np.float32)

    # Execute: w1 pushes at 1.0, w2 at 1.5; one release answers both at 2.0;
    # a join's release (answers None) counts nothing
    inb.feed(_push("w1"), 1.0)
    inb.feed(_push("w2"), 1.5)
    inb.feed(None, 1.6)
    inb.released(Release(("w1", "w2"), 1, params, answers=(1, 1)), 2.0)
    inb.feed(_push("w3"), 3.0)
    inb.released(Release(("w3",), 2, params, answers=(None,)), 3.2)
    inb.released(Release(("w1",), 3, params, answers=(2,)), 4.0)  # no push pending
    rep = inb.report()

    # Assert
    assert rep["pushes"] == 3 and rep["push_to_release_n"] == 2
    assert rep["push_to_release_ms_p50"] == pytest.approx(750.0)
    assert rep["push_to_release_ms_p99"] == pytest.approx(995.0)


def test_inbox_depth_samples_and_empty_reports() -> None:
    class _Box:
        def __init__(self) -> None:
            self.n = 0

        def qsize(self) -> int:
            return self.n

    class _Link:
        inbox = _Box()

    inb = Inbound(window=3)
    assert inb.report()["inbox_depth_p99"] is None
    assert inb.report()["push_to_release_ms_p50"] is None
    link = _Link()
    for n in (5, 0, 100, 1, 2):
        link.inbox.n = n
        inb.sample(link)
    inb.sample(object())  # a link without an inbox is skipped
    rep = inb.report()
    assert rep["inbox_depth_samples"] == 3  # the window keeps the last three
    assert rep["inbox_depth_max"] == 100
    assert percentiles([1.0, 3.0], (50.0,)) == [2.0]
