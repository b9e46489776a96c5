"""Workers that lie inside the job: 1 or 2 of 8, under every kind of policy.

A least-squares problem stands in for the model: worker i's gradient at
theta is ``theta - target_i`` plus noise, its targets skewed around the
fleet's (non-IID). Honest workers push that gradient (H = 1) or the delta
of H local SGD steps; liars push what the red team's liars pushed. The job
holds when theta ends as close to the honest fleet's target as a clean run
gets it.
"""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import ParameterServer
from edgeps.core.norm_guard import NormGuard
from edgeps.core.types import Join, Push, Release
from edgeps.policy import parse_policy

DIM, N, LR = 20, 8, 0.05
TARGET = np.linspace(-2.0, 2.0, DIM)


def _update(
    theta: np.ndarray, target: np.ndarray, h: int, rng: np.random.Generator
) -> np.ndarray:
    """The gradient (h = 1) or the delta of h local SGD steps at LR."""
    if h <= 1:
        return theta - target + rng.normal(0.0, 0.3, DIM)
    local = theta.copy()
    for _ in range(h):
        local -= LR * (local - target + rng.normal(0.0, 0.3, DIM))
    return theta - local


def _lie(kind: str, u: np.ndarray) -> tuple[np.ndarray, int, int | None]:
    """(update, samples, steps or None: as computed) a liar of ``kind`` pushes."""
    if kind == "flip10":
        return -10.0 * u, 32, None
    if kind == "x1e6":
        return 1e6 * u, 32, None
    if kind == "samples":
        return -3.0 * u, 2**32 - 1, None
    if kind == "steps65535":
        return u, 32, 65535
    return u, 32, None


def run_job(
    policy: str, h: int, kind: str | None, n_liars: int, pushes: int = 800, **kw: object
) -> float:
    """The distance of the final theta from the honest fleet's target."""
    rng = np.random.default_rng(3)
    offsets = rng.normal(0.0, 0.5, (N, DIM))
    offsets -= offsets[: N - n_liars].mean(axis=0)  # the honest fleet's target
    ps = ParameterServer(
        np.zeros(DIM, np.float32),
        policy=parse_policy(policy),
        lr=LR,
        norm_guard=NormGuard(),
        liveness_timeout=1e9,
        **kw,  # type: ignore[arg-type]
    )
    ids = [f"w{i}" for i in range(N)]
    ready: dict[str, tuple[int, np.ndarray]] = {}
    clock = dict.fromkeys(ids, 0)
    now = 0.0

    def carry(actions: list[object]) -> None:
        for a in actions:
            if isinstance(a, Release):
                for wid in a.worker_ids:
                    ready[wid] = (int(a.version), np.array(a.params, np.float64))

    for wid in ids:
        carry(ps.handle(Join(wid, session=1), now))
    for _ in range(pushes):
        if not ready:
            break
        wid = sorted(ready)[int(rng.integers(len(ready)))]
        version, theta = ready.pop(wid)
        i = ids.index(wid)
        u = _update(theta, TARGET + offsets[i], h, rng)
        samples, steps = 32, (h if h > 1 else None)
        if kind is not None and i >= N - n_liars:
            u, samples, lied = _lie(kind, u)
            steps = lied if lied is not None else steps
        clock[wid] += 1
        now += 0.01
        extra = {} if steps is None else {"steps": steps}
        push = Push(
            wid, clock[wid], clock[wid], version, u.astype(np.float32),
            samples=samples, session=1, **extra,
        )  # fmt: skip
        carry(ps.handle(push, now))
    theta = ps.params_snapshot()[1].astype(np.float64)
    return float(np.linalg.norm(theta - TARGET))


# (policy, local steps): per-push policies on gradients and on deltas, and
# the aggregating ones, as the red team ran them
CASES = [
    ("dsp", 1),
    ("asp", 1),
    ("ssp:3", 1),
    ("bsp", 1),
    ("dsp", 4),
    ("fedbuff:k=4", 4),
    ("fedavg", 4),
    ("fedasync", 4),
]


@pytest.mark.parametrize(("policy", "h"), CASES)
@pytest.mark.parametrize("kind", ["flip10", "x1e6", "samples"])
@pytest.mark.parametrize("n_liars", [1, 2])
def test_a_job_holds_with_liars_among_8(
    policy: str, h: int, kind: str, n_liars: int
) -> None:
    # Prepare: the clean run's distance is what noise and skew leave
    clean = run_job(policy, h, None, 0)
    # Execute
    lied = run_job(policy, h, kind, n_liars)
    # Assert: near the honest target, within 0.5 of the clean run's distance
    assert clean < 1.0
    assert lied < clean + 0.5, f"{policy} H={h} {kind} x{n_liars}: {lied:.3f}"


def test_a_delta_claiming_65535_steps_moves_nothing_more() -> None:
    clean = run_job("dsp", 4, None, 0)
    assert run_job("dsp", 4, "steps65535", 2) < clean + 0.5


def test_honest_skewed_workers_are_rarely_pulled_in() -> None:
    # Prepare: a clean run, each worker's pushes counted
    rng = np.random.default_rng(5)
    ps = ParameterServer(np.zeros(DIM, np.float32), policy=parse_policy("asp"), lr=LR)
    offsets = rng.normal(0.0, 0.5, (N, DIM))
    theta = np.zeros(DIM)
    for i in range(N):
        ps.handle(Join(f"w{i}", session=1), 0.0)
    # Execute
    for t in range(1, 101):
        for i in range(N):
            v, theta = ps.params_snapshot()
            u = _update(theta.astype(np.float64), TARGET + offsets[i], 1, rng)
            push = Push(f"w{i}", t, t, v, u.astype(np.float32), session=1)
            ps.handle(push, t + 0.01 * i)
    # Assert: no honest worker treated as an outlier; most pushes as sent
    assert ps.centered is not None
    report = ps.centered.report()
    pulled = sum(report["pulled"].values())  # type: ignore[attr-defined]
    assert pulled < 0.4 * 100 * N
    assert all(r < 0.8 for r in report["record"].values())  # type: ignore[attr-defined]
