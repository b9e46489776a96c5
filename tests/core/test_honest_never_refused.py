"""Property: in a run without an attacker no honest push is ever refused, whatever
the sizes of the honest gradients, and no barrier waits on anyone for good."""

from __future__ import annotations

import numpy as np
from edgeps.core import ParameterServer
from edgeps.core.norm_guard import NormGuard
from edgeps.core.types import Join, Push, Rejected, Release, Tick
from edgeps.policy import parse_policy
from hypothesis import given, settings
from hypothesis import strategies as st

N_PARAMS = 5
POLICIES = ("bsp", "asp", "ssp:2", "dsp", "kofn:auto", "dssp")


@st.composite
def honest_runs(draw: st.DrawFn) -> tuple[str, list[float], list[tuple[int, float]]]:
    """A policy, each worker's gradient scale, and a push order (worker, drift)."""
    policy = draw(st.sampled_from(POLICIES))
    scales = draw(
        st.lists(st.floats(1e-3, 1e3), min_size=2, max_size=6)
    )  # one worker's gradients may be 10^6 times another's
    order = draw(
        st.lists(
            st.tuples(st.integers(0, len(scales) - 1), st.floats(0.05, 20.0)),
            min_size=10,
            max_size=120,
        )
    )
    return policy, scales, order


@settings(max_examples=150, deadline=None)
@given(honest_runs())
def test_honest_pushes_are_never_refused_and_every_worker_gets_released(
    run: tuple[str, list[float], list[tuple[int, float]]],
) -> None:
    # Prepare: the default norm bound on; every worker joined
    policy, scales, order = run
    ps = ParameterServer(
        np.zeros(N_PARAMS, np.float32),
        policy=parse_policy(policy),
        norm_guard=NormGuard(),
        liveness_timeout=1e9,
    )
    rng = np.random.default_rng(len(order))
    ids = [f"w{i}" for i in range(len(scales))]
    released: dict[str, int | None] = {}
    seq = dict.fromkeys(ids, 0)
    clock = dict.fromkeys(ids, 0)
    refusals: list[Rejected] = []
    now = 0.0

    def carry(actions: list) -> None:
        for a in actions:
            if isinstance(a, Release):
                for wid in a.worker_ids:
                    released[wid] = int(a.version)
            elif isinstance(a, Rejected):
                refusals.append(a)

    for wid in ids:
        carry(ps.handle(Join(wid), now))

    # Execute: each step, a released worker (the drawn one if it may push)
    # pushes an honest gradient of its own scale, drifting in size
    for index, drift in order:
        now += 0.01
        ready = [w for w in ids if released.get(w) is not None]
        assert ready, "every worker is held: the barrier waits on nobody's push"
        wid = ids[index] if ids[index] in ready else ready[0]
        g = rng.standard_normal(N_PARAMS).astype(np.float32)
        g *= np.float32(scales[ids.index(wid)] * drift)
        seq[wid] += 1
        clock[wid] += 1
        base = released.pop(wid)
        assert base is not None
        push = Push(wid, clock[wid], seq[wid], base, g, 0.01, 32)
        carry(ps.handle(push, now))
        carry(ps.handle(Tick(), now))

    # Assert: only K-of-N's own rule (a round's late gradient is dropped, as
    # backup workers do) may turn an honest push away; never its size
    assert [r for r in refusals if r.reason != "too_stale"] == []
    assert not refusals or policy.startswith("kofn")
    assert ps.version == len(order) - len(refusals)
    assert np.isfinite(ps.params_snapshot()[1]).all()
