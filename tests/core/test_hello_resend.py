"""A HELLO's resend: the worker's own release, bounded per worker (core, pure)."""

from __future__ import annotations

import numpy as np
from edgeps.core import ParameterServer
from edgeps.core.types import Join, Push, Release
from edgeps.policy import parse_policy

N = 3


def releases_to(actions: list[object], wid: str) -> list[Release]:
    return [a for a in actions if isinstance(a, Release) and wid in a.worker_ids]


def joined(policy: str, *wids: str) -> ParameterServer:
    ps = ParameterServer(np.zeros(N, np.float32), policy=parse_policy(policy))
    for i, wid in enumerate(wids):
        ps.handle(Join(wid, 100 + i, instance=100 + i, nonce=7 + i), 0.0)
    return ps


def push(ps: ParameterServer, wid: str, seq: int, now: float) -> list[object]:
    session = 100 + "abc".index(wid)
    p = Push(wid, seq, seq, 0, np.ones(N, np.float32), 0.0, 1, session)
    return ps.handle(p, now)


def test_a_hello_brings_its_own_release_never_a_round_with_others() -> None:
    # Prepare: b and c wait at the BSP barrier for a
    ps = joined("bsp", "a", "b", "c")
    push(ps, "b", 1, 0.1)
    push(ps, "c", 1, 0.1)
    # Execute: a says HELLO on a new link while its push would free the round
    acts = ps.handle(Join("a", 555, instance=100, nonce=99), 0.2)
    # Assert: a's release names a alone
    mine = releases_to(acts, "a")
    assert mine and all(r.worker_ids == ("a",) for r in mine), (
        "HELD: a HELLO was answered by a shared round"
    )


def test_a_replayed_same_link_hello_gets_at_most_one_copy_per_release() -> None:
    # Prepare: a joined and was released; a HELLO of its link was captured
    ps = joined("asp", "a")
    hello = Join("a", 100, instance=100, nonce=7)
    # Execute: the capture is replayed 50 times within the resend gap
    first = [releases_to(ps.handle(hello, 0.3), "a") for _ in range(50)]
    # Assert: one resend (it was released since the last), then none
    assert sum(1 for r in first if r) == 1, "HELD: a replayed HELLO flooded copies"
    assert ps.resends_refused == 49
    # after the gap a lost resend is asked for again and sent
    assert releases_to(ps.handle(hello, 0.3 + ps.resend_gap), "a")
    # a normal release in between allows the next HELLO at once
    push(ps, "a", 1, 1.5)
    assert releases_to(ps.handle(hello, 1.6), "a"), "HELD: an honest HELLO was refused"


def test_a_new_link_always_gets_its_release() -> None:
    ps = joined("asp", "a")
    ps.handle(Join("a", 100, instance=100, nonce=7), 0.1)
    acts = ps.handle(Join("a", 777, instance=100, nonce=8), 0.1)
    assert releases_to(acts, "a"), "HELD: a new link's HELLO got no release"
