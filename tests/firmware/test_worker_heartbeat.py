"""Heartbeats of the shared worker loop on CPython against the real host PS."""

from __future__ import annotations

import time

from edgeps_worker import wire_host as wire
from edgeps_worker.worker import Worker

from tests.firmware.test_worker_loop import JOB, WID, InProcessPS, make_trainer


class CountingPS(InProcessPS):
    """The real PS in process; counts the HEARTBEATs it is sent."""

    def __init__(self, n_params: int):
        super().__init__(n_params)
        self.heartbeats = 0

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        if wire.decode(payload).type == wire.HEARTBEAT:
            self.heartbeats += 1
        super().publish(topic, payload, qos, retain)


def test_no_heartbeat_while_updates_flow():
    # Prepare: ASP releases at once, so pushes follow each other within
    # milliseconds, far inside the 2 s heartbeat period
    trainer = make_trainer()
    ps = CountingPS(trainer.n_params)
    t0 = time.monotonic()

    def stop() -> bool:
        return time.monotonic() - t0 > 3.0

    w = Worker(ps, trainer, JOB, WID, stop=stop, heartbeat_ms=2000, poll_ms=1)
    # Execute
    w.run()
    # Assert: every push was heard as a sign of life, no HEARTBEAT was sent
    assert w.stats["pushes"] >= 10
    assert ps.heartbeats == 0 and w.stats["heartbeats"] == 0
    assert len(ps.updates) == w.stats["pushes"]
    assert ps.server.stats()[WID].rejected == {}
