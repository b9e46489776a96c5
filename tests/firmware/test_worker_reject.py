"""A worker whose UPDATE the PS refuses at ingest goes on at once, on CPython
against the real host PS (ingest, core and outbox) in process."""

from __future__ import annotations

import struct
import time

import pytest
from edgeps_worker import wire_host as wire
from edgeps_worker.worker import Worker

from tests.firmware.test_worker_loop import JOB, WID, InProcessPS, make_trainer

# the UPDATE's dtype byte: prefix, ids, then the fixed fields before it
_DTYPE_AT = wire.PREFIX_LEN + len(JOB) + len(WID) + struct.calcsize("<QIIIfIfH")


class WrongCodeOnce(InProcessPS):
    """The link delivers the worker's first UPDATE with another code (F16) in
    its dtype byte, so the real ingest refuses it as ``codec``."""

    def __init__(self, n_params: int) -> None:
        super().__init__(n_params)
        self.corrupted = 0

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        msg = wire.decode(payload)
        if msg.type == wire.UPDATE and msg.seq == 1:
            assert payload[_DTYPE_AT] == wire.DTYPE_F32
            payload = bytearray(payload)
            payload[_DTYPE_AT] = wire.DTYPE_F16
            self.corrupted += 1
        super().publish(topic, bytes(payload), qos, retain)


def test_an_update_refused_at_ingest_brings_a_hello_and_a_release_at_once():
    # Prepare: a release timeout far longer than the run, so only the REJECT
    # can move the worker on
    trainer = make_trainer()
    ps = WrongCodeOnce(trainer.n_params)
    deadline = time.monotonic() + 20  # bounds the run if the worker stalls
    w = Worker(ps, trainer, JOB, WID, max_iterations=4, poll_ms=1,
               release_timeout_ms=600_000,
               stop=lambda: time.monotonic() > deadline)  # fmt: skip

    # Execute
    w.run()

    # Assert: the refused push was counted by the PS and the worker, answered
    # by one more HELLO, and the three pushes after it were applied
    assert ps.corrupted == 1
    assert ps.coord.accounting.rejected[WID]["codec"] == 1
    assert w.reject_reasons == {"codec": 1}
    assert ps.hellos == 2
    assert [u.seq for u in ps.updates] == [2, 3, 4]


@pytest.mark.parametrize("reason", ["bad_length", "bad_index"])
def test_a_reject_for_an_older_seq_is_only_counted(reason: str) -> None:
    # a REJECT naming a push the worker has moved past asks for nothing
    from edgeps_worker import worker_link

    class Msg:
        seq = 0

    Msg.reason = reason
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    w = Worker(ps, trainer, JOB, WID, max_iterations=2, poll_ms=1)
    w.run()
    hellos = w.stats["hellos"]
    worker_link.on_reject(w, Msg())
    assert w.stats["hellos"] == hellos
    assert w.reject_reasons == {reason: 1}
