"""The shared worker loop on CPython against the real host PS, in process."""

from __future__ import annotations

import time
from array import array

import numpy as np
import pytest
from edgeps.core import Heartbeat, Join, ParameterServer
from edgeps.policy.asp import ASP
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps_worker import wire_host as wire
from edgeps_worker.ring import RingBuffer
from edgeps_worker.trainer import KernelTrainer
from edgeps_worker.worker import Worker

JOB = "job1"
WID = "w1"
SPEC = "mlp:6-5-3"
BIG_SPEC = "mlp:6-24-3"  # 243 params: 972 bytes, several 256-byte chunks


class Downlink:
    """The broker's side towards the worker: retained MODEL, queued messages."""

    def __init__(self) -> None:
        self.inbox: list[tuple[str, bytes]] = []
        self.model = b""  # the retained MODEL message

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        if retain:
            self.model = bytes(payload)
        else:
            self.inbox.append((topic, bytes(payload)))

    def get(self, timeout: float) -> None:
        return None  # the PS is driven by InProcessPS.publish, not by its loop

    def get_nowait(self) -> None:
        return None


class InProcessPS:
    """A transport whose far side is the real host PS in process: the
    coordinator's ingest, ParameterServer (ASP, SGD lr 0.1) and outbox.

    What it records about the worker's messages (``updates``: the UPDATEs the
    PS applied; ``hello_instances``: HELLOs it did not refuse) is read from
    what the PS did, not decided here.
    """

    def __init__(self, n_params: int, spec: str = SPEC, drop_updates: int = 0):
        self.n_params = n_params
        self.params = (np.arange(n_params, dtype=np.float32) - n_params / 2) / 50
        self.server = ParameterServer(self.params.copy(), policy=ASP(), lr=0.1)
        self.down = Downlink()
        self.inbox = self.down.inbox  # the same list: what the PS sends lands here
        self.coord = Coordinator(
            self.server, self.down, Settings(job=JOB, model=spec), policy_name="asp"
        )
        self.coord.publish_model("running")
        self.connected = False
        self.updates: list[wire.Message] = []
        self.hellos = 0
        self.byes: list[str] = []
        self.drop_updates = drop_updates  # the link loses this many whole UPDATEs
        self._dropping = 0  # chunks of the UPDATE being lost still to come
        self.fail_connects = 0
        self.hello_instances: list[int] = []
        self.connects = 0
        self.seen = wire.Reassembler(1 << 20, 60, 8)  # what reached the PS

    @property
    def model(self) -> bytes:
        return self.down.model

    @model.setter
    def model(self, payload: bytes) -> None:
        self.down.model = payload

    def remember_other_process(self, instance: int) -> None:
        """Another live process holds this worker id (heard from in its session)."""
        now = time.monotonic()
        self.server.handle(Join(WID, 12345, instance=instance), now)
        self.server.handle(Heartbeat(WID, 0, session=12345), now)

    def connect(self, will_topic: str, will_payload: bytes) -> None:
        self.connects += 1
        if self.fail_connects:
            self.fail_connects -= 1
            raise OSError("refused")
        self.connected = True
        self.inbox.append((wire.topic_model(JOB), self.model))

    def subscribe(self, topic: str, qos: int = 1) -> None:
        assert self.connected

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        if not self.connected:
            raise OSError("not connected")
        msg = wire.decode(payload)
        if msg.type == wire.UPDATE and self._lose(msg):
            return
        sent, applied = len(self.inbox), self.coord.applied
        self.coord.handle(topic, bytes(payload), time.monotonic())
        answers = [wire.decode(p) for _, p in self.inbox[sent:]]
        refused = any(m.type in (wire.REJECT, wire.STOP) for m in answers)
        if msg.type == wire.HELLO:
            self.hellos += 1
            if not refused:
                self.hello_instances.append(msg.instance)
        elif msg.type == wire.UPDATE:
            whole = self.seen.add(msg, 0.0)
            if whole is not None and self.coord.applied > applied:
                self.updates.append(whole)
        elif msg.type == wire.BYE:
            self.byes.append(msg.reason)

    def _lose(self, msg: wire.Message) -> bool:
        """The link drops every chunk of the next ``drop_updates`` UPDATEs."""
        if msg.chunk_index == 0 and self.drop_updates and not self._dropping:
            self.drop_updates -= 1
            self._dropping = msg.chunk_count
        if self._dropping:
            self._dropping -= 1
            return True
        return False

    def poll(self, timeout_ms: int):
        if not self.connected:
            raise OSError("not connected")
        return self.inbox.pop(0) if self.inbox else None

    def close(self) -> None:
        self.connected = False


def make_trainer(seed: int = 3, spec: str = SPEC) -> KernelTrainer:
    rng = np.random.default_rng(seed)
    ring = RingBuffer(32, 6, seed=seed)
    for _ in range(32):
        x = rng.normal(size=6)
        ring.add(list(x), int(x[0] > 0) + int(x[1] > 0))
    return KernelTrainer(spec, ring, batch=8)


def test_worker_joins_pushes_and_stops_after_max_iterations():
    # Prepare
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    w = Worker(ps, trainer, JOB, WID, instance=7, max_iterations=5)
    # Execute
    reason = w.run()
    # Assert
    assert reason == "iterations"
    assert [u.seq for u in ps.updates] == [1, 2, 3, 4, 5]
    assert [u.clock for u in ps.updates] == [1, 2, 3, 4, 5]
    assert [u.base_version for u in ps.updates] == [0, 1, 2, 3, 4]
    assert all(u.samples == 8 and u.session == w.session for u in ps.updates)
    assert ps.hello_instances == [7]
    assert ps.byes == ["bye"]
    assert w.stats["pushes"] == 5 and w.stats["releases"] == 5


def test_params_are_reassembled_into_the_trainer_buffer():
    # Prepare: a chunk size that does not divide the body (the host sends
    # chunks of at least 256 bytes, so the model is larger here)
    trainer = make_trainer(spec=BIG_SPEC)
    ps = InProcessPS(trainer.n_params, BIG_SPEC)
    w = Worker(ps, trainer, JOB, WID, max_iterations=2, max_chunk=256)
    # Execute
    w.run()
    # Assert: the buffer holds exactly what the PS sent for version 1
    got = np.frombuffer(trainer.params_buffer(), dtype=np.float32)
    assert w.version == 1
    first = ps.updates[0]
    expected = ((np.arange(trainer.n_params) - trainer.n_params / 2) / 50).astype(
        np.float32
    ) - 0.1 * np.frombuffer(bytes(first.data), dtype="<f4")
    np.testing.assert_array_equal(got, expected.astype(np.float32))


def test_gradient_matches_the_kernel_on_the_received_params():
    # Prepare
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    w = Worker(ps, trainer, JOB, WID, max_iterations=1)
    # Execute
    w.run()
    # Assert: the first UPDATE is the gradient at the initial parameters
    grad = np.frombuffer(bytes(ps.updates[0].data), dtype="<f4")
    assert grad.shape == (trainer.n_params,)
    assert np.all(np.isfinite(grad)) and np.abs(grad).sum() > 0
    assert ps.updates[0].loss == pytest.approx(w.last_loss, rel=1e-6)


def test_reconnects_with_backoff_after_refused_connects():
    # Prepare
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    ps.fail_connects = 3
    w = Worker(
        ps, trainer, JOB, WID, max_iterations=2, backoff_min_ms=1, backoff_max_ms=4
    )
    # Execute
    reason = w.run()
    # Assert
    assert reason == "iterations"
    assert w.stats["reconnects"] == 3 and ps.connects == 4


def test_lost_update_is_not_resent_a_re_hello_gets_current_params():
    # Prepare: the PS loses the first UPDATE entirely
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params, drop_updates=1)
    w = Worker(
        ps, trainer, JOB, WID, max_iterations=3, release_timeout_ms=20, poll_ms=5
    )
    # Execute
    reason = w.run()
    # Assert: the re-HELLO (same link, same session) released it again; the
    # lost gradient was not resent, and each seq was applied once
    assert reason == "iterations"
    assert [u.seq for u in ps.updates] == [2, 3]
    assert w.stats["timeouts"] >= 1 and ps.hellos >= 2
    assert {u.session for u in ps.updates} == {w.session}


class FinishingPS(InProcessPS):
    """Ends the job after ``after`` applied updates: MODEL done and STOP done.

    Before that, a forged STOP done for another session and a MODEL done
    arrive: neither may stop the worker."""

    def __init__(self, n_params: int, after: int):
        super().__init__(n_params)
        self.after = after

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        super().publish(topic, payload, qos, retain)
        if len(self.updates) == 1 and self.after:
            down = wire.topic_down(JOB, WID)
            forged = wire.encode_stop(JOB, WID, self.coord.run_id, 99, "done")
            done = wire.encode_model(JOB, self.coord.run_id, "done", SPEC, 1, 1)
            self.inbox += [(down, forged), (wire.topic_model(JOB), done)]
        if len(self.updates) == self.after:
            self.after = 0
            self.coord.finish("max_updates")


def test_stop_callback_ends_the_loop_and_only_a_stop_for_its_session_stops():
    # Prepare
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return len(ps.updates) >= 2

    w = Worker(ps, trainer, JOB, WID, stop=stop)
    # Execute
    assert w.run() == "stopped"
    # Assert
    assert len(ps.updates) == 2
    ps2 = FinishingPS(trainer.n_params, after=3)
    w2 = Worker(ps2, make_trainer(), JOB, WID)
    assert w2.run() == "done"
    # the release answering the third update was sent before the STOP
    assert len(ps2.updates) == 4 and w2.stats["bad_messages"] == 1


def test_model_mismatch_stops_without_pushing():
    # Prepare: the job trains another model; its HELLO is answered by STOP
    trainer = make_trainer()
    ps = InProcessPS(2410, "mlp:64-32-10")
    # Execute
    reason = Worker(ps, trainer, JOB, WID).run()
    # Assert
    assert reason == "model_mismatch" and ps.updates == []


def test_garbage_and_wrong_length_params_are_counted_not_fatal():
    # Prepare
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    down = wire.topic_down(JOB, WID)
    ps.inbox += [
        (down, b"\x00garbage"),
        (down, wire.encode_params(JOB, WID, 1, 2, 5, array("f", [1.0, 2.0]))[0]),
        (
            down,
            wire.encode_params(JOB, "other", 1, 2, 5, bytes(4 * trainer.n_params))[0],
        ),
    ]
    w = Worker(ps, trainer, JOB, WID, max_iterations=2)
    # Execute
    reason = w.run()
    # Assert
    assert reason == "iterations"
    assert w.stats["bad_messages"] == 3
    assert len(ps.updates) == 2


def test_bad_arguments_raise():
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    with pytest.raises(ValueError):
        Worker(ps, trainer, "bad job", WID)
    with pytest.raises(ValueError):
        Worker(ps, trainer, JOB, WID, heartbeat_ms=0)
    with pytest.raises(ValueError):
        Worker(ps, trainer, JOB, WID, backoff_min_ms=10, backoff_max_ms=5)


def test_duplicate_id_is_retried_twice_then_the_worker_exits():
    # Prepare: another live process holds this worker id
    trainer = make_trainer()
    ps = InProcessPS(trainer.n_params)
    ps.remember_other_process(1000)
    w = Worker(ps, trainer, JOB, WID, instance=5, release_timeout_ms=10, poll_ms=2)
    # Execute
    reason = w.run()
    # Assert: three HELLOs, each refused, and nothing pushed
    assert reason == "duplicate_id"
    assert ps.hellos == 3 and ps.hello_instances == [] and ps.updates == []
    # and its BYE names no live link, so the live one is not marked gone
    assert ps.server.stats()[WID].rejected == {"duplicate_id": 3, "stale_session": 1}
    assert ps.server.worker_state(WID).value == "live"


class HoldingPS(InProcessPS):
    """Never releases after the first push; answers pushes with a REJECT."""

    def __init__(self, n_params: int, reason: str):
        super().__init__(n_params)
        self.reason = reason
        self.heartbeats = 0

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        msg = wire.decode(payload)
        if msg.type == wire.HEARTBEAT:
            self.heartbeats += 1
        elif msg.type == wire.UPDATE:
            self.updates.append(msg)
            run = self.coord.run_id
            reject = wire.encode_reject(
                JOB, WID, run, msg.session, msg.seq, self.reason
            )
            self.inbox.append((wire.topic_down(JOB, WID), reject))
            return
        super().publish(topic, payload, qos, retain)


def test_unknown_worker_reject_triggers_a_hello_and_heartbeats_go_on():
    # Prepare
    trainer = make_trainer()
    ps = HoldingPS(trainer.n_params, "unknown_worker")
    polls = {"n": 0}
    deadline = time.monotonic() + 10

    def stop() -> bool:
        # heartbeats are due by the clock, not by the poll count: run until
        # one went out (or a bounded wait ran out) and the loop polled a while
        polls["n"] += 1
        beat = ps.heartbeats >= 1 or time.monotonic() > deadline
        return polls["n"] > 60 and beat

    w = Worker(ps, trainer, JOB, WID, stop=stop, heartbeat_ms=1, poll_ms=1,
               release_timeout_ms=100000)  # fmt: skip
    # Execute
    w.run()
    # Assert: the reject is counted and answered by a HELLO, which released it
    assert w.reject_reasons["unknown_worker"] >= 1
    assert ps.hellos >= 2 and w.stats["releases"] >= 2
    assert ps.heartbeats >= 1 and w.stats["heartbeats"] == ps.heartbeats


def test_other_rejects_are_only_counted():
    trainer = make_trainer()
    ps = HoldingPS(trainer.n_params, "not_finite")
    polls = {"n": 0}

    def stop() -> bool:
        polls["n"] += 1
        return polls["n"] > 30

    w = Worker(ps, trainer, JOB, WID, stop=stop, poll_ms=1)
    w.run()
    assert w.reject_reasons == {"not_finite": 1}
    assert ps.hellos == 1 and w.stats["pushes"] == 1


class LinkDropsMidUpdate(InProcessPS):
    """Drops the link once, in the middle of sending the given push's UPDATE."""

    def __init__(self, n_params: int, fail_on_seq: int):
        super().__init__(n_params)
        self.fail_on_seq = fail_on_seq

    def publish(self, topic, payload, qos=1, retain=False) -> None:
        msg = wire.decode(payload)
        if msg.type == wire.UPDATE and msg.seq == self.fail_on_seq:
            self.fail_on_seq = -1
            self.connected = False
            raise OSError("link lost mid-update")
        super().publish(topic, payload, qos, retain)


def test_update_lost_mid_send_is_dropped_and_the_reconnect_says_hello_first():
    # Prepare: the last allowed push fails on its first try
    trainer = make_trainer()
    ps = LinkDropsMidUpdate(trainer.n_params, fail_on_seq=3)
    w = Worker(ps, trainer, JOB, WID, max_iterations=3, backoff_min_ms=1,
               backoff_max_ms=2)  # fmt: skip
    # Execute
    reason = w.run()
    # Assert: the new link got a new session; the old session's update was
    # dropped, not resent, and a fresh gradient went out in the new one
    assert reason == "iterations"
    assert w.stats["reconnects"] == 1 and w.stats["dropped_updates"] == 1
    assert w.stats["pushes"] == 3
    assert [u.seq for u in ps.updates] == [1, 2, 1]
    assert len({u.session for u in ps.updates}) == 2
    assert ps.server.stats()[WID].rejected == {}
