"""The shared worker loop (CPython) under release rounds: RELEASE and shared copy.

A scripted PS on the far side of a small transport answers HELLO with WELCOME
and a release, then sends what the test scripts: a RELEASE before its shared
copy, QoS 1 redeliveries, a lost chunk, a copy that does not match its digest.
The worker is the real one with the board's KernelTrainer.
"""

from __future__ import annotations

import time

import numpy as np
from edgeps.kernels import params_codec
from edgeps_worker import wire_host as wire
from edgeps_worker.ring import RingBuffer
from edgeps_worker.trainer import KernelTrainer
from edgeps_worker.worker import Worker

JOB, WID, RUN, SESSION = "job1", "w1", 41, 777
SPEC = "mlp:6-24-3"  # 243 params: several 256-byte chunks
KEY = b"k" * 32


class ScriptedPS:
    """A transport whose far side answers HELLO and then plays ``script``.

    ``script`` holds, per UPDATE the worker pushes, the list of messages the
    PS sends next (each one (topic, payload)); the worker's own messages are
    kept decoded in ``sent``.
    """

    def __init__(self, n_params: int, script: list[list[tuple[str, bytes]]]):
        self.n = n_params
        self.script = script
        self.inbox: list[tuple[str, bytes]] = []
        self.sent: list[wire.Message] = []
        self.subscribed: list[str] = []
        self.connected = False
        model = wire.encode_model(JOB, RUN, "running", SPEC, 0, n_params)
        self.inbox.append((wire.topic_model(JOB), bytes(model)))

    def connect(self, will_topic, will_payload):
        self.connected = True

    def subscribe(self, topic, qos=1):
        self.subscribed.append(topic)

    def publish(self, topic, payload, qos=1, retain=False):
        msg = wire.decode(payload, KEY)
        self.sent.append(msg)
        if msg.type == wire.HELLO:
            down = wire.topic_down(JOB, WID)
            welcome = wire.encode_welcome(
                JOB, WID, RUN, msg.nonce, SESSION, self.n, SPEC, key=KEY
            )
            self.inbox.append((down, bytes(welcome)))
            for c in own(1, vector(1, self.n)):
                self.inbox.append((down, c))
        elif msg.type == wire.UPDATE and self.script:
            self.inbox.extend(self.script.pop(0))

    def poll(self, timeout_ms):
        if self.inbox:
            return self.inbox.pop(0)
        time.sleep(min(timeout_ms, 20) / 1000)
        return None

    def close(self):
        self.connected = False

    def hellos(self) -> int:
        return sum(m.type == wire.HELLO for m in self.sent)

    def pushes(self) -> int:
        return sum(m.type == wire.UPDATE for m in self.sent)


def vector(version: int, n: int) -> np.ndarray:
    return np.random.default_rng(version).normal(size=n).astype(np.float32)


def own(version: int, v: np.ndarray, seq: int = 0) -> list[bytes]:
    chunks = wire.encode_params(
        JOB, WID, RUN, SESSION, version, v.tobytes(), 256, seq=seq, key=KEY
    )
    return [bytes(c) for c in chunks]


def shared(version: int, v: np.ndarray) -> list[tuple[str, bytes]]:
    topic = wire.topic_params(JOB)
    return [(topic, bytes(c)) for c in wire.encode_shared_params(
        JOB, RUN, version, v.tobytes(), max_chunk=256)]  # fmt: skip


def release(version: int, v: np.ndarray, seq: int) -> tuple[str, bytes]:
    digest = params_codec.digest(v)
    payload = wire.encode_release(JOB, WID, RUN, SESSION, version, digest, seq, key=KEY)
    return wire.topic_down(JOB, WID), bytes(payload)


def make_worker(ps: ScriptedPS, trainer: KernelTrainer, iterations: int) -> Worker:
    return Worker(ps, trainer, JOB, WID, max_iterations=iterations, key=KEY,
                  release_timeout_ms=300, heartbeat_ms=60000, poll_ms=20)  # fmt: skip


def trainer() -> KernelTrainer:
    rng = np.random.default_rng(0)
    ring = RingBuffer(32, 6, seed=0)
    for _ in range(32):
        x = rng.normal(size=6)
        ring.add(list(x), int(x[0] > 0) + int(x[1] > 0))
    return KernelTrainer(SPEC, ring, batch=8)


def test_a_release_before_its_shared_copy_and_redeliveries_step_once_each():
    # Prepare: round 2 sends the RELEASE first, then the copy backwards with a
    # redelivered chunk, then the RELEASE again (QoS 1); round 3 the copy first
    t = trainer()
    n = t.n_params
    v2, v3 = vector(2, n), vector(3, n)
    copy2 = shared(2, v2)
    round2 = [release(2, v2, 1), *copy2[::-1], copy2[0], release(2, v2, 1)]
    round3 = [*shared(3, v3), release(3, v3, 2)]
    ps = ScriptedPS(n, [round2, round3])
    w = make_worker(ps, t, iterations=3)
    # Execute
    reason = w.run()
    # Assert: three pushes, one per release, on exactly the released vectors
    updates = [m for m in ps.sent if m.type == wire.UPDATE]
    assert reason == "iterations" and w.stats["releases"] == 3
    assert [(u.seq, u.base_version) for u in updates] == [(1, 1), (2, 2), (3, 3)]
    np.testing.assert_array_equal(np.asarray(t.params), v3)
    assert w.stats["bad_messages"] == 0 and ps.hellos() == 1
    assert wire.topic_params(JOB) in ps.subscribed


def test_a_lost_shared_chunk_is_recovered_by_the_release_timeout():
    # Prepare: round 2's copy loses a chunk; the re-HELLO gets an own release
    t = trainer()
    n = t.n_params
    v2 = vector(2, n)
    ps = ScriptedPS(n, [[release(2, v2, 1), *shared(2, v2)[1:]]])
    w = make_worker(ps, t, iterations=2)
    # Execute
    reason = w.run()
    # Assert: no push on the incomplete copy; HELLO again, then a release whole
    assert reason == "iterations" and w.stats["timeouts"] == 1
    assert ps.hellos() == 2 and ps.pushes() == 2
    assert [m.base_version for m in ps.sent if m.type == wire.UPDATE] == [1, 1]


def test_a_copy_that_does_not_match_its_digest_is_never_used():
    # Prepare: a forged shared copy, then a RELEASE with the real vector's digest
    t = trainer()
    n = t.n_params
    real, forged = vector(2, n), vector(99, n)
    ps = ScriptedPS(n, [[*shared(2, forged), release(2, real, 1)]])
    w = make_worker(ps, t, iterations=2)
    # Execute
    reason = w.run()
    # Assert: refused and counted, HELLO at once (before any timeout)
    assert reason == "iterations" and w.stats["bad_messages"] == 1
    assert w.stats["timeouts"] == 0 and ps.hellos() == 2
    assert [m.base_version for m in ps.sent if m.type == wire.UPDATE] == [1, 1]


def test_a_replayed_old_copy_before_the_release_changes_nothing():
    # Prepare: round 2's copy arrives, then an old copy replayed, then the RELEASE
    t = trainer()
    n = t.n_params
    v2, stale = vector(2, n), vector(1, n)
    round2 = [*shared(2, v2), *shared(1, stale), *shared(1, stale), release(2, v2, 1)]
    ps = ScriptedPS(n, [round2])
    w = make_worker(ps, t, iterations=2)
    # Execute
    reason = w.run()
    # Assert: the RELEASE used the held copy at once: no HELLO, no timeout
    assert reason == "iterations" and w.stats["timeouts"] == 0, (
        "HELD: the worker waited out its release timeout"
    )
    assert ps.hellos() == 1
    assert [m.base_version for m in ps.sent if m.type == wire.UPDATE] == [1, 2]


def test_a_forged_copy_asks_one_hello_per_release():
    # Prepare: a forged copy; its RELEASE redelivered twice, the forgery resent
    t = trainer()
    n = t.n_params
    real, forged = vector(2, n), vector(98, n)
    rel = release(2, real, 1)
    ps = ScriptedPS(n, [[*shared(2, forged), rel, rel, *shared(2, forged), rel]])
    w = make_worker(ps, t, iterations=2)
    # Execute
    reason = w.run()
    # Assert: one HELLO for the one RELEASE (plus the join's), no timeout
    assert reason == "iterations" and w.stats["timeouts"] == 0
    assert ps.hellos() == 2, "HELD: forged copies made the worker flood HELLOs"
