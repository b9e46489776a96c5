"""The relay's parts without a broker: the fold, the gated site coordinator, the bridge.

The site coordinator runs on the real ParameterServer core and a recording
link (an inbox we fill, publishes we keep), as in tests/runtime/test_coordinator.py.
"""

from __future__ import annotations

import copy
import math
import queue

import numpy as np
import pytest
from edgeps.policy import parse_policy
from edgeps.relay.bridge import bridge_config
from edgeps.relay.fold import Round
from edgeps.relay.site import WAKE_TOPIC, SiteCoordinator, SiteServer
from edgeps.relay.upstream import RelayStopped, RelayTrainer
from edgeps.runtime.coordinator import Settings
from edgeps.transport.broker import BrokerAddress
from edgeps_worker import wire_host as wire

JOB = "site"
N = 10


class RecordingLink:
    def __init__(self) -> None:
        self.inbox: queue.Queue[tuple[str, bytes]] = queue.Queue()
        self.sent: list[tuple[str, bytes]] = []

    def get(self, timeout: float) -> tuple[str, bytes] | None:
        try:
            return self.inbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def get_nowait(self) -> tuple[str, bytes] | None:
        return self.get(0.0)

    def publish(self, topic: str, payload: bytes, qos: int = 1, retain: bool = False):
        self.sent.append((topic, bytes(payload)))

    def params(self, wid: str) -> list[wire.Message]:
        """The parameters each release of ``wid`` gave it, oldest first: its own
        PARAMS (one chunk each here), or for a RELEASE of a round of several
        workers the shared PARAMS of the version it names, with its seq."""
        shared: dict[int, wire.Message] = {}
        out = []
        for t, p in self.sent:
            if t == wire.topic_params(JOB):
                m = wire.decode(p)
                shared[m.version] = m
            elif t == wire.topic_down(JOB, wid):
                m = wire.decode(p)
                if m.type == wire.PARAMS:
                    out.append(m)
                elif m.type == wire.RELEASE:
                    got = copy.copy(shared[m.version])
                    got.seq = m.seq  # the UPDATE this worker's release answers
                    out.append(got)
        return out


def _site(
    policy: str = "bsp", min_fold: int = 0
) -> tuple[SiteCoordinator, RecordingLink, Round]:
    round_ = Round(N)
    server = SiteServer(np.zeros(N, np.float32), round_, policy=parse_policy(policy))
    link = RecordingLink()
    coord = SiteCoordinator(
        server,
        link,
        Settings(job=JOB, model=f"linear:{N - 1}"),
        policy_name=policy,
        min_fold=min_fold,
    )
    return coord, link, round_


def _hello(coord: SiteCoordinator, wid: str, now: float) -> None:
    coord.handle(wire.topic_up(JOB, wid), wire.encode_hello(JOB, wid, 7, 7), now)


def _push(
    coord: SiteCoordinator, wid: str, seq: int, base: int, value: float, samples: int
) -> None:
    session = coord.peers.get(wid).session
    grad = np.full(N, value, dtype="<f4").tobytes()
    for part in wire.encode_update(
        JOB, wid, session, seq, seq, base, 0.01, samples, value, grad
    ):
        coord.handle(wire.topic_up(JOB, wid), part, 1.0 + seq)


def _values(msg: wire.Message) -> np.ndarray:
    return np.frombuffer(bytes(msg.data), dtype="<f4")


def _never() -> bool:
    return False


def _clock() -> float:
    return 0.0


# ---- the fold ----------------------------------------------------------------


def test_a_round_is_the_sample_weighted_mean_of_its_gradients() -> None:
    r = Round(3)
    r.fold(np.ones(3, np.float32), 8, 1.0, late=False)
    r.fold(np.full(3, 3.0, np.float32), 24, 2.0, late=True)

    assert r.close()
    got = r.wait(_never, clock=_clock)

    assert got is not None
    np.testing.assert_allclose(got.grad, np.full(3, (8 + 72) / 32))
    assert (got.samples, got.count, got.late) == (32, 2, 1)
    assert got.loss == pytest.approx((8 * 1.0 + 24 * 2.0) / 32)
    assert r.count == 0 and (r.rounds, r.folded, r.late, r.largest) == (1, 2, 1, 2)


def test_an_empty_round_does_not_close_and_a_stop_ends_the_wait() -> None:
    r = Round(2)
    assert not r.close()
    assert r.wait(lambda: True, clock=_clock) is None

    r.fold(np.ones(2, np.float32), 0, math.nan, late=False)  # no samples: weight 1
    got = r.wait(lambda: True, clock=_clock)

    assert got is not None and got.count == 1 and math.isnan(got.loss)


def test_the_wait_beats_upstream_while_the_round_is_open() -> None:
    r = Round(2)
    t = [0.0]
    beats: list[float] = []

    def clock() -> float:
        t[0] += 1.0
        return t[0]

    def stop() -> bool:
        return t[0] > 12.0

    r.wait(stop, beat=lambda: beats.append(t[0]), beat_every=5.0, clock=clock, poll=0)

    assert len(beats) == 2


def test_the_trainer_offers_what_landed_and_returns_the_folded_round() -> None:
    r = Round(4)
    woke: list[int] = []
    r.wake = lambda: woke.append(1)
    trainer = RelayTrainer(4, "linear:3", r, _never)
    trainer.params_buffer()[:] = [1, 2, 3, 4]
    r.fold(np.full(4, 2.0, np.float32), 4, 0.5, late=False)
    r.close()

    loss, samples, grad = trainer.step()

    np.testing.assert_array_equal(r.take_central(), [1, 2, 3, 4])
    assert woke == [1]
    assert (loss, samples) == (0.5, 4)
    np.testing.assert_array_equal(np.frombuffer(grad, "<f4"), np.full(4, 2.0))
    with pytest.raises(RelayStopped):
        RelayTrainer(4, "linear:3", r, lambda: True).step()


# ---- the site coordinator ----------------------------------------------------


def test_site_bsp_holds_the_round_until_central_params_come() -> None:
    coord, link, r = _site("bsp")
    _hello(coord, "w1", 0.0)
    _hello(coord, "w2", 0.0)
    joined = {w: len(link.params(w)) for w in ("w1", "w2")}

    _push(coord, "w1", 1, coord.server.version, 1.0, 8)
    assert r.count == 1 and not r.closed
    _push(coord, "w2", 1, coord.server.version, 3.0, 24)

    # w2 completes the BSP barrier: nobody is sent anything yet
    assert {w: len(link.params(w)) for w in ("w1", "w2")} == joined
    assert coord.gated.keys() == {"w1", "w2"} and r.closed
    got = r.wait(_never, clock=_clock)
    assert got is not None and (got.count, got.samples, got.late) == (2, 32, 0)
    np.testing.assert_allclose(got.grad, np.full(N, (8 + 72) / 32))

    # central parameters arrive: one fan-out of them to both, answering seq 1
    r.offer(np.full(N, 7.0, np.float32))
    coord.handle(WAKE_TOPIC, b"", 5.0)

    for w in ("w1", "w2"):
        last = link.params(w)[-1]
        np.testing.assert_array_equal(_values(last), np.full(N, 7.0))
        assert last.seq == 1 and last.version == coord.server.fanout_version
    assert coord.gated == {} and coord.fan_outs == 1


def test_applied_pushes_leave_the_site_parameters_alone() -> None:
    coord, link, r = _site("asp")
    _hello(coord, "w1", 0.0)

    _push(coord, "w1", 1, 0, 5.0, 8)

    _, params = coord.server.params_snapshot()
    np.testing.assert_array_equal(params, np.zeros(N))
    assert r.count == 1 and coord.gated.keys() == {"w1"}


def test_a_push_on_an_older_fan_out_is_folded_as_late() -> None:
    coord, link, r = _site("asp")
    _hello(coord, "w1", 0.0)
    _hello(coord, "w2", 0.0)
    base = coord.server.version
    _push(coord, "w1", 1, base, 1.0, 8)  # ASP: closes the round at once
    assert r.wait(_never, clock=_clock) is not None
    r.offer(np.ones(N, np.float32))
    coord.handle(WAKE_TOPIC, b"", 3.0)

    _push(coord, "w2", 1, base, 1.0, 8)  # computed before that fan-out

    got = r.wait(_never, clock=_clock)
    assert got is not None and (got.count, got.late) == (1, 1)


def test_min_fold_waits_for_that_many_gradients_or_every_live_board() -> None:
    coord, link, r = _site("asp", min_fold=3)
    for w in ("w1", "w2"):
        _hello(coord, w, 0.0)

    _push(coord, "w1", 1, coord.server.version, 1.0, 8)
    assert coord.gated.keys() == {"w1"} and not r.closed  # ASP released it
    _push(coord, "w2", 1, coord.server.version, 1.0, 8)

    assert r.closed and r.count == 2  # 2 live boards: fewer than 3 will do


def test_min_fold_closes_when_the_missing_board_leaves() -> None:
    coord, link, r = _site("asp", min_fold=2)
    for w in ("w1", "w2"):
        _hello(coord, w, 0.0)
    _push(coord, "w1", 1, coord.server.version, 1.0, 8)
    assert not r.closed

    nonce = coord.peers.get("w2").nonce
    bye = wire.encode_bye(JOB, "w2", nonce, "bye")
    coord.handle(wire.topic_up(JOB, "w2"), bye, 3.0)
    coord.tick(3.1)

    assert r.closed and r.count == 1


def test_a_wake_without_new_parameters_sends_nothing() -> None:
    coord, link, r = _site("asp")
    _hello(coord, "w1", 0.0)
    sent = len(link.sent)

    coord.handle(WAKE_TOPIC, b"", 1.0)

    assert len(link.sent) == sent and coord.fan_outs == 0


# ---- the bridge ----------------------------------------------------------------


def test_the_bridge_carries_only_the_relays_topics() -> None:
    text = bridge_config("a", BrokerAddress("127.0.0.1", 1883), "lab", "relay-a")

    lines = text.splitlines()
    assert "address 127.0.0.1:1883" in lines
    topics = sorted(line for line in lines if line.startswith("topic "))
    assert topics == [
        "topic edgeps/lab/down/relay-a in 1",
        "topic edgeps/lab/model in 1",
        "topic edgeps/lab/up/relay-a out 1",
    ]
    with pytest.raises(ValueError):
        bridge_config("a b", BrokerAddress("127.0.0.1", 1883), "lab", "relay-a")
