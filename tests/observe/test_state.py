"""The coordinator's snapshot fields for plots and dashboards, and LatestState."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.observe.state import LatestState
from edgeps.policy.asp import ASP
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps_worker import wire_host as wire

JOB = "jo"
N = 20


class QuietLink:
    """An inbox nobody fills and publishes nobody reads."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[str, bytes]] = queue.Queue()

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        return None

    def get_nowait(self) -> tuple[str, bytes] | None:
        return None

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        return None


def _push(coord: Coordinator, wid: str, seq: int, base: int, now: float) -> None:
    grad = np.full(N, 0.1, dtype="<f4").tobytes()
    session = coord.peers.get(wid).session  # from the WELCOME
    for part in wire.encode_update(
        JOB, wid, session, seq, seq, base, 0.02, 8, 0.3, grad, max_chunk=4096
    ):
        coord.handle(wire.topic_up(JOB, wid), part, now)


def test_record_carries_policy_timings_staleness_and_inbox() -> None:
    # Prepare: two workers on ASP; w2 pushes on an old version (staleness 2)
    seen: list[dict] = []
    server = ParameterServer(np.zeros(N, np.float32), policy=ASP(), lr=0.1)
    link = QuietLink()
    link.inbox.put(("x", b"y"))  # one message waiting
    coord = Coordinator(
        server,
        link,
        Settings(job=JOB, model=f"linear:{N - 1}"),
        policy_name="asp",
        observer=seen.append,
    )
    for wid in ("w1", "w2"):
        coord.handle(wire.topic_up(JOB, wid), wire.encode_hello(JOB, wid, 1, 1), 0.0)
    _push(coord, "w1", 1, 0, 0.1)
    _push(coord, "w1", 2, 1, 0.2)
    _push(coord, "w2", 1, 0, 0.3)

    # Execute
    coord._emit(0.4)

    # Assert
    (record,) = seen
    assert record["job"] == JOB and record["policy"] == "asp"
    assert record["bound"] == server.policy.bound_description
    assert record["inbox_depth"] == 1
    assert record["staleness_counts"] == {"0": 2, "2": 1}
    w1 = record["workers"]["w1"]
    assert w1["compute_s"] == pytest.approx(0.02)
    assert w1["iteration_s"] is not None and w1["comm_s"] is not None
    assert w1["compute_s"] + w1["comm_s"] == pytest.approx(w1["iteration_s"], rel=0.3)


def test_latest_state_keeps_the_newest_record_and_a_bounded_history() -> None:
    state = LatestState(history=3)
    assert state.view() == {"workers": {}, "ready": False, "history": []}

    for i in range(5):
        state.publish({"elapsed": float(i), "accuracy": i / 10, "updates_per_s": 1.0})

    view = state.view()
    assert view["ready"] and view["elapsed"] == 4.0
    assert [p["elapsed"] for p in view["history"]] == [2.0, 3.0, 4.0]
    assert state.published == 5


def test_readers_never_see_a_half_published_state() -> None:
    # Prepare: a writer publishing records whose two fields always agree
    state = LatestState(history=10)
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            state.publish({"elapsed": float(i), "updates_per_s": float(i)})
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        # Execute / Assert
        for _ in range(2000):
            view = state.view()
            if view["ready"]:
                assert view["elapsed"] == view["history"][-1]["elapsed"]
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def test_history_must_hold_something() -> None:
    with pytest.raises(ValueError):
        LatestState(history=0)
