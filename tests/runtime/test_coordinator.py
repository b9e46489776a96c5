"""The coordinator against the real ParameterServer and a recording link."""

from __future__ import annotations

import queue
from pathlib import Path

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.policy import parse_policy
from edgeps.policy.asp import ASP
from edgeps.runtime.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps_worker import wire_host as wire

JOB = "jc"
N = 100


class RecordingLink:
    """Stands in for the broker connection: an inbox we fill, publishes we keep."""

    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.sent: list[tuple[str, bytes, int, bool]] = []

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_nowait(self) -> tuple[str, bytes] | None:
        return self.get(0.0)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        self.sent.append((topic, bytes(payload), qos, retain))

    def decoded(self, topic: str) -> list[wire.Message]:
        """What was sent on ``topic`` after the WELCOMEs that open sessions."""
        msgs = [wire.decode(p) for t, p, _, _ in self.sent if t == topic]
        return [m for m in msgs if m.type != wire.WELCOME]


def _coordinator(policy: str = "asp", **kw) -> tuple[Coordinator, RecordingLink]:
    server = ParameterServer(
        np.ones(N, np.float32), policy=parse_policy(policy), lr=0.5
    )
    link = RecordingLink()
    settings = Settings(job=JOB, model=f"linear:{N - 1}", **kw)
    return Coordinator(server, link, settings, policy_name=policy), link


def _grad(value: float) -> bytes:
    return np.full(N, value, dtype="<f4").tobytes()


def _push(
    coord: Coordinator, wid: str, seq: int, base: int, now: float, chunk: int = 100
) -> None:
    session = coord.peers.get(wid).session  # from the WELCOME (0: none)
    for part in wire.encode_update(
        JOB, wid, session, seq, seq, base, 0.01, 8, 0.3, _grad(1.0), max_chunk=chunk
    ):
        coord.handle(wire.topic_up(JOB, wid), part, now)


def test_hello_update_release_cycle() -> None:
    # Prepare
    coord, link = _coordinator()
    up, down = wire.topic_up(JOB, "w1"), wire.topic_down(JOB, "w1")

    # Execute
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1, max_chunk=300), 0.0)
    _push(coord, "w1", 1, 0, 0.5)

    # Assert: two releases, each chunked to the worker's 300-byte limit
    assert all(len(p) <= 300 for t, p, _, _ in link.sent if t == down)
    chunks = link.decoded(down)
    assert len(chunks) > 2
    assert {m.type for m in chunks} == {wire.PARAMS}
    versions = sorted({m.version for m in chunks})
    assert versions == [0, 1]
    last = [m for m in chunks if m.version == 1]
    body = b"".join(bytes(m.data) for m in sorted(last, key=lambda m: m.chunk_index))
    np.testing.assert_allclose(np.frombuffer(body, "<f4"), np.full(N, 0.5))
    assert coord.applied == 1
    assert all(qos == 1 and not retain for t, _, qos, retain in link.sent if t == down)


def test_duplicates_and_garbage_are_dropped_and_counted() -> None:
    # Prepare
    coord, link = _coordinator()
    up = wire.topic_up(JOB, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1), 0.0)
    _push(coord, "w1", 1, 0, 0.1, chunk=4096)

    # Execute
    _push(coord, "w1", 1, 0, 0.2, chunk=4096)  # QoS1 redelivery of the same push
    coord.handle(up, b"\xff" * 30, 0.3)
    coord.handle("edgeps/jc/up/bad id", b"x", 0.3)
    _push(coord, "stranger", 1, 0, 0.4)  # never said hello
    _push(coord, "w1", 2, 1, 0.5)

    # Assert
    assert coord.applied == 2
    assert coord.server.stats()["w1"].rejected == {"duplicate": 1}
    assert coord.rejected["duplicate"] == 1 and coord.rejected["unknown_worker"] == 1
    assert coord.ingest.dropped["magic"] == 1 and coord.ingest.dropped["topic"] == 1
    rejects = [
        m for m in link.decoded(wire.topic_down(JOB, "w1")) if m.type == wire.REJECT
    ]
    assert [(m.seq, m.reason) for m in rejects] == [(1, "duplicate")]


def test_redelivered_chunks_of_a_finished_update_are_counted() -> None:
    coord, link = _coordinator()
    coord.handle(wire.topic_up(JOB, "w1"), wire.encode_hello(JOB, "w1", 1, 1), 0.0)
    _push(coord, "w1", 1, 0, 0.1)

    _push(coord, "w1", 1, 0, 0.2)

    assert coord.applied == 1
    assert coord.ingest.dropped["duplicate_chunk"] > 1


def test_run_publishes_model_and_stops_at_the_update_limit() -> None:
    # Prepare
    coord, link = _coordinator(max_updates=3, max_time=30.0)
    up = wire.topic_up(JOB, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1), 0.0)
    session = coord.peers.get("w1").session
    link.sent.clear()
    for seq in (1, 2, 3):
        for chunk in wire.encode_update(
            JOB, "w1", session, seq, seq, seq - 1, 0.0, 1, 0.0, _grad(0.1)
        ):
            link.inbox.put((up, chunk))

    # Execute
    summary = coord.run()

    # Assert
    assert summary.stop_reason == "max_updates"
    assert summary.version == 3 and summary.workers["w1"]["accepted"] == 3
    models = [
        (wire.decode(p), retain)
        for t, p, _, retain in link.sent
        if t == wire.topic_model(JOB)
    ]
    assert [(m.state, m.version, r) for m, r in models] == [
        ("running", 0, True),
        ("done", 3, True),
    ]


def test_stop_request_ends_the_loop_with_a_checkpoint(tmp_path: Path) -> None:
    # Prepare
    path = tmp_path / "ck.npz"
    coord, link = _coordinator(max_time=60.0)

    def checkpoint(c: Coordinator) -> None:
        version, params = c.server.params_snapshot()
        save_checkpoint(path, Checkpoint(params, version))

    coord.on_checkpoint = checkpoint
    coord.handle(wire.topic_up(JOB, "w1"), wire.encode_hello(JOB, "w1", 1, 1), 0.0)
    _push(coord, "w1", 1, 0, 0.1)
    coord.stop()

    # Execute
    summary = coord.run()

    # Assert
    assert summary.stop_reason == "interrupted"
    assert load_checkpoint(path).version == 1


def test_bsp_release_waits_for_every_live_worker() -> None:
    coord, link = _coordinator(policy="bsp")
    for wid in ("a", "b"):
        coord.handle(wire.topic_up(JOB, wid), wire.encode_hello(JOB, wid, 1, 1), 0.0)
    link.sent.clear()

    _push(coord, "a", 1, 0, 0.1)
    after_a = len(link.decoded(wire.topic_down(JOB, "a")))
    _push(coord, "b", 1, 0, 0.2)

    assert after_a == 0
    assert len(link.decoded(wire.topic_down(JOB, "a"))) == 1
    assert len(link.decoded(wire.topic_down(JOB, "b"))) == 1


def test_with_a_key_everything_sent_is_signed_and_unsigned_input_dropped() -> None:
    from edgeps.security.keys import derive_worker_key

    # Prepare
    key = b"k3y"
    coord, link = _coordinator(hmac_key=key)
    up = wire.topic_up(JOB, "w1")

    # Execute
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1), 0.0)  # unsigned: dropped
    own_key = derive_worker_key(key, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1, key=own_key), 0.1)
    coord.publish_model("running")

    # Assert: what goes to w1 is signed with w1's own key; MODEL is unsigned
    own = derive_worker_key(key, "w1")
    assert coord.ingest.dropped == {"hmac": 1}
    assert link.sent, "the signed hello was answered"
    for topic, payload, _, _ in link.sent:
        if topic == wire.topic_model(JOB):
            assert not wire.decode(payload).tagged
        else:
            assert wire.decode(payload, key=own).tagged


def test_metrics_records_carry_per_worker_state(tmp_path: Path) -> None:
    # Prepare
    from edgeps.observe.metrics import MetricsWriter

    out = tmp_path / "m.jsonl"
    coord, _ = _coordinator()
    coord.metrics = MetricsWriter(out)
    coord.handle(wire.topic_up(JOB, "w1"), wire.encode_hello(JOB, "w1", 1, 1), 0.0)
    _push(coord, "w1", 1, 0, 0.1)

    # Execute
    coord._emit(1.0)
    coord.metrics.close()

    # Assert
    import json

    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["version"] == 1 and record["updates"] == 1
    w1 = record["workers"]["w1"]
    assert w1["clock"] == 1 and w1["state"] == "live" and w1["accepted"] == 1
    assert {"staleness", "class", "waiting"} <= set(w1)


def test_worker_with_another_model_is_refused_not_joined() -> None:
    coord, link = _coordinator()
    up = wire.topic_up(JOB, "w1")

    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1, "mlp:4-3-2"), 0.0)
    right = wire.encode_hello(JOB, "w3", 1, 1, f"linear:{N - 1}")
    coord.handle(wire.topic_up(JOB, "w3"), right, 0.0)

    assert coord.ingest.dropped == {"model_mismatch": 1}
    assert "w3" in coord.server.stats()
    (stop,) = link.decoded(wire.topic_down(JOB, "w1"))
    # the job's model follows the reason token, for the worker to say
    want = f"model linear:{N - 1}"
    assert (stop.type, stop.reason, stop.session) == (wire.STOP, want, 1)
    assert "w1" not in coord.server.stats()


def test_hello_of_another_process_is_stopped_as_duplicate_id() -> None:
    coord, link = _coordinator()
    up = wire.topic_up(JOB, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 5, 50), 0.0)
    session = coord.peers.get("w1").session
    # a heartbeat in the issued session proves the holder (a HELLO would not)
    coord.handle(up, wire.encode_heartbeat(JOB, "w1", session, 0), 0.05)

    coord.handle(up, wire.encode_hello(JOB, "w1", 3, 30), 0.1)  # another process

    stops = [m for m in link.decoded(wire.topic_down(JOB, "w1")) if m.type == wire.STOP]
    # addressed to the refused HELLO's link; the live session is untouched
    assert [(m.session, m.reason) for m in stops] == [(30, "duplicate_id")]
    assert coord.peers.get("w1").session == session
    assert coord.ingest.dropped == {} and coord.outbox.errors == 0


def test_params_seq_is_the_seq_of_the_update_the_release_answers() -> None:
    # Prepare
    coord, link = _coordinator()
    up, down = wire.topic_up(JOB, "w1"), wire.topic_down(JOB, "w1")

    # Execute: a hello, then pushes with seq 7 and 8
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1), 0.0)
    _push(coord, "w1", 7, 0, 0.1, chunk=4096)
    _push(coord, "w1", 8, 1, 0.2, chunk=4096)

    # Assert: 0 answers the hello (no UPDATE), then each UPDATE's own seq
    params = [m for m in link.decoded(down) if m.type == wire.PARAMS]
    assert [(m.version, m.seq) for m in params] == [(0, 0), (1, 7), (2, 8)]


class BrokenPolicy(ASP):
    """A policy with a bug: it looks up a worker that is not there."""

    def may_proceed(self, view, worker_id, now):  # type: ignore[no-untyped-def]
        return {}[worker_id]


def test_a_bug_in_the_core_raises_instead_of_being_counted() -> None:
    # Prepare
    server = ParameterServer(np.ones(N, np.float32), policy=BrokenPolicy())
    coord = Coordinator(
        server, RecordingLink(), Settings(job=JOB, model=""), policy_name="broken"
    )
    up = wire.topic_up(JOB, "w1")
    coord.handle(up, wire.encode_hello(JOB, "w1", 1, 1), 0.0)

    # Execute / Assert: the KeyError surfaces; network input was fine, so
    # nothing is counted as dropped
    with pytest.raises(KeyError):
        _push(coord, "w1", 1, 0, 0.1)
    assert coord.ingest.dropped == {}


def test_at_the_end_each_worker_gets_the_final_parameters_before_stop_done() -> None:
    # Prepare: two workers hold sessions, one pushed twice (compressed downlink)
    coord, link = _coordinator(max_updates=2, max_time=30.0, params_code=3)
    for wid in ("w1", "w2"):
        hello = wire.encode_hello(JOB, wid, 1, 1, dtypes=(1, 3))
        coord.handle(wire.topic_up(JOB, wid), hello, 0.0)
    session = coord.peers.get("w1").session
    up = wire.topic_up(JOB, "w1")
    for seq in (1, 2):
        for chunk in wire.encode_update(
            JOB, "w1", session, seq, seq, seq - 1, 0.0, 1, 0.0, _grad(0.1)
        ):
            link.inbox.put((up, chunk))
    # Execute
    summary = coord.run()
    # Assert: on each down topic the last messages are a whole F32 release of
    # the final parameters (seq 0), then STOP done
    final = coord.server.params_view()[1]
    for wid in ("w1", "w2"):
        msgs = link.decoded(wire.topic_down(JOB, wid))
        assert msgs[-1].type == wire.STOP and msgs[-1].reason == "done"
        last = [m for m in msgs if m.type == wire.PARAMS][-1]
        assert (last.version, last.seq, last.dtype) == (summary.version, 0, 1)
        assert last.chunk_count == 1 and msgs[-2] is last
        got = np.frombuffer(bytes(last.data), "<f4")
        assert np.array_equal(got, final)
