"""A relay's own work assignment over its site's boards (`edgeps relay --balance`):
the site's balancer gives a slow board a smaller batch, in the release it sends."""

from __future__ import annotations

import numpy as np
from edgeps.core.balance import Balancer
from edgeps.policy import parse_policy
from edgeps.relay.fold import Round
from edgeps.relay.site import WAKE_TOPIC, SiteCoordinator, SiteServer
from edgeps.runtime.coordinator import Settings
from edgeps_worker import wire_host as wire

from tests.relay.test_site import JOB, N, RecordingLink, _clock, _never


def _site(balance: bool) -> tuple[SiteCoordinator, RecordingLink, Round]:
    policy = parse_policy("bsp")
    round_ = Round(N)
    server = SiteServer(
        np.zeros(N, np.float32), round_, policy=policy,
        balancer=Balancer.for_policy(policy) if balance else None,
    )  # fmt: skip
    link = RecordingLink()
    coord = SiteCoordinator(
        server, link, Settings(job=JOB, model=f"linear:{N - 1}"), policy_name="bsp"
    )
    return coord, link, round_


def _hello(coord: SiteCoordinator, wid: str) -> None:
    hello = wire.encode_hello(JOB, wid, 7, 7, max_batch=32)
    coord.handle(wire.topic_up(JOB, wid), hello, 0.0)


def _push(
    coord: SiteCoordinator, wid: str, seq: int, compute: float, n: int, now: float
) -> None:
    session = coord.peers.get(wid).session
    grad = np.full(N, 1.0, dtype="<f4").tobytes()
    base = coord.server.version
    for part in wire.encode_update(
        JOB, wid, session, seq, seq, base, compute, n, 0.5, grad
    ):
        coord.handle(wire.topic_up(JOB, wid), part, now)


def _batches(link: RecordingLink, wid: str) -> list[int]:
    """The batch each release to ``wid`` asked for (0: keep your own)."""
    out = []
    for t, p in link.sent:
        if t == wire.topic_down(JOB, wid):
            m = wire.decode(p)
            if m.type in (wire.PARAMS, wire.RELEASE) and m.seq:
                out.append(m.batch)
    return out


def _rounds(balance: bool, rounds: int = 5) -> tuple[list[int], list[int]]:
    # w2 computes 4x as long as w1 at the same batch
    coord, link, r = _site(balance)
    _hello(coord, "w1")
    _hello(coord, "w2")
    asked = {"w1": 32, "w2": 32}
    released = 0.0  # both joined then
    for seq in range(1, rounds + 1):
        ends = []
        for wid, per_sample in (("w1", 0.001), ("w2", 0.004)):
            compute = per_sample * asked[wid]
            ends.append(released + compute + 0.01)  # 10 ms of link legs
            _push(coord, wid, seq, compute, asked[wid], ends[-1])
        assert r.wait(_never, clock=_clock) is not None
        r.offer(np.full(N, float(seq), np.float32))
        released = max(ends) + 0.001  # the central parameters come back
        coord.handle(WAKE_TOPIC, b"", released)
        for wid in asked:
            got = _batches(link, wid)
            asked[wid] = got[-1] or asked[wid]
    return _batches(link, "w1"), _batches(link, "w2")


def test_the_relay_gives_its_slow_board_a_smaller_batch() -> None:
    fast, slow = _rounds(balance=True)
    assert len(fast) == len(slow) == 5
    # the fast board keeps its batch. At 32 the boards take 42 and 138 ms, so
    # the median board's round is 90 ms, and the slow board gets the batch
    # that fits it: (90 - 10 ms of link) / 4 ms per sample = 20
    assert all(b in (0, 32) for b in fast)
    assert 16 <= slow[-1] <= 24


def test_without_balance_the_relay_asks_for_no_batch() -> None:
    fast, slow = _rounds(balance=False)
    assert fast == slow == [0] * 5
