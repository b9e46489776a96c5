"""GcFreeze: when serve freezes its long-lived objects (pure logic, clock given)."""

from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest
from edgeps.core.server import ParameterServer
from edgeps.policy import parse_policy
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps.runtime.gc_freeze import GcFreeze
from edgeps.transport.inbox import Inbox
from edgeps_worker import wire_host as wire


class Calls:
    def __init__(self) -> None:
        self.log: list[str] = []

    def freeze(self) -> None:
        self.log.append("freeze")

    def collect(self) -> int:
        self.log.append("collect")
        return 0


def test_start_collects_then_freezes() -> None:
    c = Calls()
    g = GcFreeze(freeze=c.freeze, collect=c.collect)
    g.start()
    assert c.log == ["collect", "freeze"] and g.freezes == 1


def test_freezes_once_a_wave_of_joins_has_settled() -> None:
    c = Calls()
    g = GcFreeze(min_joins=3, quiet=1.0, freeze=c.freeze, collect=c.collect)
    for t in (0.0, 0.1, 0.2):
        g.joined(t)
    assert not g.tick(0.5)  # the last join is 0.3 s old: the wave goes on
    assert g.tick(1.2)
    assert c.log == ["freeze"]  # no full collection: that is the pause it avoids
    assert not g.tick(5.0)  # nothing new since
    g.joined(6.0)
    assert not g.tick(9.0)  # one join is not a wave
    g.joined(9.1)
    g.joined(9.2)
    assert g.tick(10.3) and g.freezes == 2 and g.pending == 0


def test_disabled_never_touches_the_collector() -> None:
    frozen = gc.get_freeze_count()
    g = GcFreeze(enabled=False, min_joins=1, quiet=0.0)
    g.start()
    g.joined(0.0)
    assert g.tick(1.0)  # the decision is the same; the call does nothing
    assert gc.get_freeze_count() == frozen


@pytest.mark.parametrize("bad", [{"min_joins": 0}, {"quiet": -1.0}])
def test_refuses_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        GcFreeze(**bad)  # type: ignore[arg-type]


class Link:
    def __init__(self) -> None:
        self.inbox = Inbox(100, 1 << 20)

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        return self.inbox.get(timeout)

    def get_nowait(self) -> tuple[str, bytes] | None:
        return self.inbox.get(None)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        return None


def test_coordinator_counts_joins_and_by_default_never_freezes() -> None:
    server = ParameterServer(np.zeros(4, np.float32), policy=parse_policy("asp"))
    link = Link()
    coord = Coordinator(
        server, link, Settings(job="jb", model="linear:3"), policy_name="asp"
    )
    for i in range(3):
        wid = f"w{i}"
        coord.handle(wire.topic_up("jb", wid), wire.encode_hello("jb", wid, 1, i), 0.0)
    coord.handle(wire.topic_up("jb", "w0"), b"junk", 0.0)  # dropped, not a join
    assert coord.gc.pending == 3
    frozen = gc.get_freeze_count()
    coord.settings.max_time = 0.3
    done = threading.Event()
    t = threading.Thread(target=lambda: (coord.run(), done.set()), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not done.is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert done.is_set()
    assert gc.get_freeze_count() == frozen  # Settings.gc_freeze is off: tests share
