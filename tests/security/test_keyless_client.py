"""Property: a client without a worker's key changes nothing.

Two in-process parameter servers (the coordinator's ingest, core and outbox,
BSP, per-device keys from one master) see the same genuine traffic of two
workers (each pushes only once released); one of them also gets, interleaved,
whatever hypothesis draws from a hostile client that can read every topic
but holds no worker's key: HELLO, UPDATE (NaN or huge gradients, any seq),
HEARTBEAT and BYE for real and
made-up ids, unsigned, signed with a guessed key, with the master itself or
with another worker's own key, naming the sessions and nonces it sniffed;
plus replays of genuine UPDATEs. The attacked server must end with the same
parameters, the same applied updates and the same members as the clean one,
so no such sequence moved the model or held the barrier.
"""

from __future__ import annotations

import numpy as np
from edgeps.core import ParameterServer
from edgeps.policy import parse_policy
from edgeps.runtime.coordinator import Coordinator, Settings
from edgeps.security.keys import derive_worker_key
from edgeps_worker import wire_host as wire
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

JOB = "prop"
N = 6
MASTER = b"m" * 32
WIDS = ("g0", "g1")
TIMEOUT = 5.0


class Link:
    """Records what the PS publishes (the down topics a sniffer can read)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        self.sent.append((topic, bytes(payload)))

    def get(self, timeout: float) -> None:
        return None

    def get_nowait(self) -> None:
        return None


class Side:
    """One PS and its two genuine workers, who follow the protocol."""

    def __init__(self) -> None:
        server = ParameterServer(
            np.zeros(N, np.float32),
            policy=parse_policy("bsp"),
            lr=0.5,
            liveness_timeout=TIMEOUT,
        )
        self.link = Link()
        cfg = Settings(job=JOB, model=f"linear:{N - 1}", hmac_key=MASTER)
        self.coord = Coordinator(server, self.link, cfg, policy_name="bsp")
        self.seq = dict.fromkeys(WIDS, 0)
        self.clock = dict.fromkeys(WIDS, 0)
        self.sent_up: list[tuple[str, bytes]] = []
        self.read = 0  # how much of link.sent the workers have read
        self.released = dict.fromkeys(WIDS, False)

    def read_down(self) -> None:
        """The workers read their down topics: a PARAMS releases them."""
        for topic, payload in self.link.sent[self.read :]:
            for wid in WIDS:
                down = topic == wire.topic_down(JOB, wid)
                if down and wire.decode(payload).type == wire.PARAMS:
                    self.released[wid] = True
        self.read = len(self.link.sent)

    def key(self, wid: str) -> bytes:
        return derive_worker_key(MASTER, wid)

    def up(self, wid: str, payload: bytes, now: float) -> None:
        topic = wire.topic_up(JOB, wid)
        self.sent_up.append((topic, bytes(payload)))
        self.coord.handle(topic, payload, now)

    def hello(self, wid: str, now: float) -> None:
        self.up(wid, wire.encode_hello(JOB, wid, 11, 22, key=self.key(wid)), now)

    def push(self, wid: str, now: float) -> None:
        """Push once released, as the protocol says (else nothing to do)."""
        self.read_down()
        if not self.released[wid]:
            return
        self.released[wid] = False
        peer = self.coord.peers.get(wid)
        self.seq[wid] += 1
        self.clock[wid] += 1
        grad = np.full(N, 0.1 * (1 + WIDS.index(wid)), "<f4").tobytes()
        version = self.coord.server.version
        for chunk in wire.encode_update(
            JOB, wid, peer.session, self.seq[wid], self.clock[wid], version,
            0.01, 4, 0.5, grad, key=self.key(wid),
        ):  # fmt: skip
            self.up(wid, chunk, now)

    def beat(self, wid: str, now: float) -> None:
        session = self.coord.peers.get(wid).session
        self.up(wid, wire.encode_heartbeat(JOB, wid, session, 0, self.key(wid)), now)


U64 = st.integers(0, 2**64 - 1)
HOSTILE = st.tuples(
    st.sampled_from(["hello", "update", "beat", "bye", "replay"]),
    st.sampled_from([*WIDS, "x9"]),
    st.sampled_from(["none", "guess", "master", "other", "guessed_master"]),
    st.sampled_from(["sniffed", "random"]),
    U64,
    st.sampled_from([1, 2, 63, 64, 2**32 - 1]),
    st.sampled_from(["nan", "huge", "tiny"]),
)
GENUINE = st.sampled_from(["push0", "push1", "beat0", "beat1", "tick"])


def _hostile(side: Side, step: tuple, now: float) -> None:
    kind, wid, key_kind, addr, value, seq, grad_kind = step
    if kind == "replay":
        if side.sent_up:
            topic, payload = side.sent_up[value % len(side.sent_up)]
            if wire.decode(payload).type == wire.UPDATE:
                side.coord.handle(topic, payload, now)
        return
    key = {
        "none": None,
        "guess": b"guess",
        "master": MASTER,
        "other": derive_worker_key(MASTER, "g1" if wid == "g0" else "g0"),
        "guessed_master": derive_worker_key(b"x" * 32, wid),
    }[key_kind]
    peer = side.coord.peers.get(wid)
    session = peer.session if addr == "sniffed" else value
    nonce = peer.nonce if addr == "sniffed" else value
    if kind == "hello":
        payload = wire.encode_hello(JOB, wid, value, nonce, key=key)
    elif kind == "beat":
        payload = wire.encode_heartbeat(JOB, wid, session, 1, key=key)
    elif kind == "bye":
        payload = wire.encode_bye(JOB, wid, nonce, "lost", key=key)
    else:
        fill = {"nan": np.nan, "huge": 1e30, "tiny": 1e-3}[grad_kind]
        grad = np.full(N, fill, "<f4").tobytes()
        (payload,) = wire.encode_update(
            JOB, wid, session, seq, 1, 0, 0.0, 1, 0.0, grad, key=key
        )
    side.coord.handle(wire.topic_up(JOB, wid), payload, now)


def _genuine(side: Side, step: str, now: float) -> None:
    if step == "tick":
        side.coord.tick(now)
        return
    wid = WIDS[int(step[-1])]
    if step.startswith("push"):
        side.push(wid, now)
    else:
        side.beat(wid, now)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(st.tuples(GENUINE, st.lists(HOSTILE, max_size=3)), max_size=30),
    st.floats(0.05, 2.0),
)
def test_no_message_without_a_workers_key_changes_params_or_barrier(
    steps: list, dt: float
) -> None:
    # Prepare: both sides join the same two genuine workers
    clean, attacked = Side(), Side()
    for side in (clean, attacked):
        for wid in WIDS:
            side.hello(wid, 0.0)
    now = 0.0

    # Execute: the same genuine steps on both, hostile traffic on one
    for genuine, hostile in steps:
        now += dt
        for h in hostile:
            _hostile(attacked, h, now)
        for side in (clean, attacked):
            _genuine(side, genuine, now)

    # Assert: the model, the applied updates and the members are the same
    a, c = attacked.coord.server, clean.coord.server
    assert a.version == c.version and attacked.coord.applied == clean.coord.applied
    np.testing.assert_array_equal(a.params_snapshot()[1], c.params_snapshot()[1])
    assert {w: a.worker_state(w) for w in a.stats()} == {
        w: c.worker_state(w) for w in c.stats()
    }
    assert set(a.stats()) == set(WIDS)
