"""What a Release carries: one read-only parameter array per version and, per
worker, the seq of the push it answers (None after a join)."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import Join, Leave, ParameterServer, Push, Rejected, Release
from edgeps.core.types import Action
from edgeps.policy.asp import ASP
from edgeps.policy.bsp import BSP

N = 4


def push(wid: str, seq: int, clock: int, base: int, value: float = 1.0) -> Push:
    return Push(wid, clock, seq, base, np.full(N, value, np.float32))


def release_of(actions: list[Action]) -> Release:
    (release,) = [a for a in actions if isinstance(a, Release)]
    return release


def test_a_release_carries_the_parameters_of_its_version_read_only() -> None:
    # Prepare
    ps = ParameterServer(np.zeros(N, np.float32), policy=ASP(), lr=0.5)
    ps.handle(Join("a"), 0.0)

    # Execute
    rel = release_of(ps.handle(push("a", 1, 1, 0), 1.0))

    # Assert: the values of version 1, computed independently: 0 - 0.5 * 1
    assert rel.version == 1 == ps.version
    np.testing.assert_array_equal(rel.params, np.full(N, -0.5, np.float32))
    assert not rel.params.flags.writeable
    with pytest.raises(ValueError):
        rel.params[0] = 7.0


def test_releases_of_one_version_share_one_array_and_later_versions_do_not() -> None:
    # Prepare
    ps = ParameterServer(np.zeros(N, np.float32), policy=ASP(), lr=1.0)

    # Execute
    first = release_of(ps.handle(Join("a"), 0.0))
    second = release_of(ps.handle(Join("b"), 0.0))
    after = release_of(ps.handle(push("a", 1, 1, 0), 1.0))

    # Assert
    assert first.version == second.version == 0
    assert first.params is second.params
    assert after.params is not first.params
    np.testing.assert_array_equal(first.params, np.zeros(N, np.float32))
    np.testing.assert_array_equal(after.params, np.full(N, -1.0, np.float32))


def test_each_released_worker_gets_the_seq_of_the_push_it_waited_on() -> None:
    # Prepare: BSP holds a's push until b pushed too
    ps = ParameterServer(np.zeros(N, np.float32), policy=BSP())
    joined = release_of(ps.handle(Join("a"), 0.0))
    ps.handle(Join("b"), 0.0)
    held = ps.handle(push("a", 5, 1, 0), 1.0)

    # Execute
    rel = release_of(ps.handle(push("b", 9, 1, 0), 2.0))

    # Assert
    assert dict(joined.targets()) == {"a": None}
    assert not any(isinstance(a, Release) for a in held)
    assert dict(rel.targets()) == {"a": 5, "b": 9}


def test_a_refused_push_is_answered_by_the_resync_release() -> None:
    # Prepare
    ps = ParameterServer(np.zeros(N, np.float32), policy=ASP())
    ps.handle(Join("a"), 0.0)

    # Execute: a push with a non-finite update is dropped, the worker resynced
    acts = ps.handle(push("a", 3, 1, 0, value=float("nan")), 1.0)

    # Assert
    assert [a.reason for a in acts if isinstance(a, Rejected)] == ["non_finite"]
    assert dict(release_of(acts).targets()) == {"a": 3}


def test_a_rejoin_answers_no_push() -> None:
    ps = ParameterServer(np.zeros(N, np.float32), policy=ASP())
    ps.handle(Join("a"), 0.0)
    ps.handle(push("a", 1, 1, 0), 1.0)
    ps.handle(Leave("a", "last_will"), 1.5)

    rel = release_of(ps.handle(Join("a", 1), 2.0))  # restarted: a new session

    assert dict(rel.targets()) == {"a": None}
