"""Work assignment: the balancer's bounds, a board's cap, weighting, stability."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import Join, ParameterServer, Push, Release
from edgeps.core.balance import Balancer
from edgeps.policy import parse_policy


class Board:
    """A board whose iteration at batch b takes fixed + b * per_sample seconds."""

    def __init__(self, per_sample: float, fixed: float = 0.01) -> None:
        self.per_sample = per_sample
        self.fixed = fixed

    def push(self, bal: Balancer, wid: str, batch: int, spike: float = 1.0) -> None:
        compute = batch * self.per_sample * spike
        bal.observe(wid, batch, compute, compute + self.fixed)


def run(bal: Balancer, boards: dict[str, Board], rounds: int, spikes=None):
    """Each round every board runs at its assigned batch; the batches per round."""
    spikes = spikes or {}
    history = []
    for r in range(rounds):
        batches = bal.batches(boards)
        history.append(batches)
        for wid, board in boards.items():
            board.push(bal, wid, batches[wid], spikes.get((wid, r), 1.0))
    return history


def joined(boards: dict[str, Board], caps=None, **kw) -> Balancer:
    bal = Balancer(**kw)
    for wid in boards:
        bal.joined(wid, (caps or {}).get(wid, 0))
    return bal


def test_slow_board_gets_a_smaller_batch_and_iterations_even_out() -> None:
    boards = {f"f{i}": Board(0.003) for i in range(5)} | {"slow": Board(0.012)}
    bal = joined(boards)
    final = run(bal, boards, 40)[-1]
    times = {w: b.fixed + final[w] * b.per_sample for w, b in boards.items()}
    assert final["f0"] == 32
    assert final["slow"] == pytest.approx(8, abs=1)
    assert max(times.values()) / min(times.values()) < 1.15


def test_assignments_stay_within_bounds_and_the_board_cap() -> None:
    boards = {
        "fast": Board(0.0005),
        "capped": Board(0.0005),
        "mid": Board(0.003),
        "mid2": Board(0.003),
        "crawl": Board(0.3),
    }
    bal = joined(boards, caps={"capped": 40}, min_batch=2, max_batch=100)
    for batches in run(bal, boards, 30):
        assert all(2 <= b <= 100 for b in batches.values())
        assert batches["capped"] <= 40
    assert batches["fast"] == 100  # would want ~190: the balancer's own bound
    assert batches["capped"] == 40  # the board's announced memory limit
    assert batches["crawl"] == 2


def test_a_cap_below_the_minimum_batch_still_wins() -> None:
    boards = {"tiny": Board(0.003), "b": Board(0.003)}
    bal = joined(boards, caps={"tiny": 1})
    assert all(h["tiny"] == 1 for h in run(bal, boards, 10))


def test_transient_spikes_do_not_move_assignments() -> None:
    rng = np.random.default_rng(3)
    boards = {f"w{i}": Board(0.003) for i in range(8)}
    spikes = {(w, r): 5.0 for w in boards for r in range(200) if rng.random() < 0.1}
    spikes[("w0", 0)] = spikes[("w0", 1)] = 5.0  # even during the warmup
    bal = joined(boards)
    history = run(bal, boards, 200, spikes)
    assert all(b == 32 for h in history for b in h.values())
    assert bal.changes == 0


def test_a_persistent_slowdown_is_followed_then_held_steady() -> None:
    boards = {f"w{i}": Board(0.003) for i in range(4)}
    bal = joined(boards)
    run(bal, boards, 20)
    boards["w3"].per_sample = 0.012  # another task took the board for good
    history = run(bal, boards, 60)
    assert history[-1]["w3"] == pytest.approx(8, abs=1)
    # settled: the last 30 rounds change nothing
    assert len({h["w3"] for h in history[-30:]}) == 1


def test_push_weight_is_samples_over_the_base_batch() -> None:
    bal = Balancer(base_batch=32)
    assert bal.weight(32) == 1.0
    assert bal.weight(8) == 0.25
    assert bal.weight(0) == 1.0  # a worker that does not say: as before


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError):
        Balancer(base_batch=0)
    with pytest.raises(ValueError):
        Balancer(base_batch=32, min_batch=64)
    with pytest.raises(ValueError):
        Balancer(hysteresis=1.5)


def _server(balancer: Balancer | None) -> ParameterServer:
    return ParameterServer(
        np.zeros(4, np.float32), policy=parse_policy("asp"), lr=1.0, balancer=balancer
    )


def _push(wid: str, seq: int, samples: int, base: int = 0) -> Push:
    return Push(
        wid, seq, seq, base, np.ones(4, np.float32), compute_time=0.01, samples=samples
    )


def test_the_server_weights_each_push_by_its_samples() -> None:
    ps = _server(Balancer(base_batch=32))
    ps.handle(Join("a"), 0.0)
    ps.handle(_push("a", 1, samples=8), 0.1)
    _, params = ps.params_snapshot()
    np.testing.assert_allclose(params, -0.25)
    plain = _server(None)
    plain.handle(Join("a"), 0.0)
    plain.handle(_push("a", 1, samples=8), 0.1)
    np.testing.assert_allclose(plain.params_snapshot()[1], -1.0)


def test_releases_carry_assignments_within_the_announced_cap() -> None:
    ps = _server(Balancer(base_batch=32))
    [join] = ps.handle(Join("a", max_batch=16), 0.0)
    assert isinstance(join, Release) and join.batches == {"a": 16}
    plain = _server(None)
    [join] = plain.handle(Join("a", max_batch=16), 0.0)
    assert isinstance(join, Release) and join.batches is None


def test_the_simulator_obeys_assignments_and_each_board_cap() -> None:
    from dataclasses import replace

    from edgeps.sim.simulator import Simulator
    from edgeps.sim.types import SimConfig

    cfg = SimConfig(policy="bsp", scenario="stragglers", balance=True, max_time=8.0)
    sim = Simulator(cfg)
    slow = [w for w, p in sim.scenario.profiles.items() if p.straggler_factor > 1]
    fast = next(w for w in sim.workers if w not in slow)
    sim.workers[fast].profile = replace(sim.workers[fast].profile, max_batch=20)
    result = sim.run()
    balanced_bsp = result.applied
    assert all(sim.workers[w].batch < 12 for w in slow)
    assert sim.workers[fast].batch <= 20
    plain = Simulator(replace(cfg, balance=False)).run()
    # the round no longer waits for 4x slower boards at full batch
    assert balanced_bsp > 2 * plain.applied


def test_labelmix_gives_every_worker_a_skewed_shard_of_distinct_rows() -> None:
    from edgeps.workloads.datasets import partition

    y = np.repeat(np.arange(10), 40)
    shards = partition(y, 64, "labelmix:0.3", seed=1)
    assert len(shards) == 64
    assert all(len(s) == 8 and len(set(s.tolist())) == 8 for s in shards)
    # skewed: most shards hold far fewer than all ten classes
    assert np.median([len(np.unique(y[s])) for s in shards]) <= 5


def test_dsp_damp_scales_only_pushes_staler_than_a_round() -> None:
    from edgeps.policy.dsp import DSP

    ps = ParameterServer(
        np.zeros(4, np.float32), policy=DSP(damp=1.0), lr=1.0, balancer=None
    )
    for w in ("a", "b"):
        ps.handle(Join(w), 0.0)
    policy = ps.policy
    assert policy.step_scale(ps.view, _push("a", 1, 32), staleness=1) == 1.0
    assert policy.step_scale(ps.view, _push("a", 1, 32), staleness=7) == 0.25
    assert DSP().step_scale(ps.view, _push("a", 1, 32), staleness=7) == 1.0
    assert "damp=1" in policy.describe() and "damp" not in DSP().describe()


def test_serve_builds_its_core_with_a_balancer_only_when_asked() -> None:
    from edgeps.runtime.config import ServeConfig
    from edgeps.runtime.job import build_server, load_model

    cfg = ServeConfig(balance=True)
    server, _ = build_server(cfg, load_model(cfg))
    assert isinstance(server.balancer, Balancer)
    plain, _ = build_server(ServeConfig(), load_model(ServeConfig()))
    assert plain.balancer is None


def test_a_push_of_its_assigned_batch_weighs_one_a_short_one_less() -> None:
    boards = {"slow": Board(0.012)} | {f"f{i}": Board(0.003) for i in range(5)}
    bal = joined(boards)
    final = run(bal, boards, 20)[-1]
    assert final["slow"] < 12
    # each push is one gradient estimate at the batch it was asked for
    assert bal.weight(final["slow"], "slow") == 1.0
    assert bal.weight(32, "f0") == 1.0
    # fewer rows than asked (a short shard, a cut-off read): less weight
    assert bal.weight(16, "f0") == 0.5
    assert bal.weight(final["slow"] // 2, "slow") == pytest.approx(
        (final["slow"] // 2) / final["slow"]
    )
    assert bal.weight(64, "f0") == 1.0  # more than asked earns no bigger step
    assert bal.weight(16) == 0.5  # a worker it does not know: over the base


def test_a_board_slower_only_within_the_tolerance_keeps_its_full_batch() -> None:
    boards = {f"w{i}": Board(0.003) for i in range(5)}
    boards["link"] = Board(0.003, fixed=0.3)  # a slow link: a retry every round
    boards["slow"] = Board(0.0045)  # 1.5x slower compute
    boards["bit"] = Board(0.0036)  # 1.2x slower compute
    bal = joined(boards)
    final = run(bal, boards, 30)[-1]
    assert final["link"] == 32  # no batch shortens its link
    assert final["bit"] == 32  # within the tolerance
    assert final["slow"] < 32
    strict = joined(boards, tolerance=0.0)
    assert run(strict, boards, 30)[-1]["bit"] < 32
    with pytest.raises(ValueError):
        Balancer(tolerance=-0.1)


def test_stragglers_under_interference_settle_and_stay_put() -> None:
    rng = np.random.default_rng(5)
    boards = {f"w{i}": Board(0.003) for i in range(6)}
    boards |= {"s0": Board(0.012), "s1": Board(0.012)}
    spikes = {(w, r): 5.0 for w in boards for r in range(300) if rng.random() < 0.1}
    bal = joined(boards)
    history = run(bal, boards, 300, spikes)
    assert all(h[w] == 32 for h in history for w in boards if w.startswith("w"))
    assert all(history[-1][s] == pytest.approx(8, abs=1) for s in ("s0", "s1"))
    # no oscillation: once settled, spikes (10% of pushes) move nothing
    assert all(h == history[-1] for h in history[20:])
    assert bal.changes <= 4


def test_eager_assigns_a_straggler_from_its_first_push() -> None:
    boards = {f"f{i}": Board(0.003) for i in range(5)} | {"slow": Board(0.012)}
    history = run(joined(boards, eager=True), boards, 3)
    assert history[0]["slow"] == 32  # nothing known before its first push
    assert history[1]["slow"] == pytest.approx(8, abs=1)
    plain = run(joined(boards), boards, 4)
    assert [h["slow"] for h in plain[:3]] == [32, 32, 32]  # three pushes first
    assert plain[3]["slow"] == pytest.approx(8, abs=1)


def test_eager_a_first_push_spike_costs_one_iteration_then_nothing_moves() -> None:
    rng = np.random.default_rng(7)
    boards = {f"w{i}": Board(0.003) for i in range(8)}
    # after the warmup, every board spikes 5x in 10% of its iterations
    spikes = {(w, r): 5.0 for w in boards for r in range(3, 200) if rng.random() < 0.1}
    spikes[("w0", 0)] = 5.0
    bal = joined(boards, eager=True)
    history = run(bal, boards, 200, spikes)
    assert history[1]["w0"] < 32  # its first push only bounded its pace
    assert all(h["w0"] == 32 for h in history[2:])  # its second push corrected it
    assert all(b == 32 for h in history for w, b in h.items() if w != "w0")
    assert bal.changes == 2


def _round_batches(eager: bool) -> tuple[list[dict[str, int]], list[str]]:
    from edgeps.sim.simulator import Simulator
    from edgeps.sim.types import SimConfig

    cfg = SimConfig(
        policy="bsp",
        scenario="stragglers",
        balance=True,
        balance_eager=eager,
        max_time=2.0,
    )
    sim = Simulator(cfg)
    rounds: list[dict[str, int]] = []
    carry = sim.on_release

    def on_release(action: Release) -> None:
        if len(action.worker_ids) == len(sim.workers):  # a BSP round, not a join
            rounds.append(dict(action.batches or {}))
        carry(action)

    sim.on_release = on_release  # type: ignore[method-assign]
    sim.run()
    slow = [w for w, p in sim.scenario.profiles.items() if p.straggler_factor > 1]
    return rounds, slow


def test_the_simulator_assigns_from_the_first_push_when_eager() -> None:
    rounds, slow = _round_batches(eager=True)
    assert all(rounds[0][w] < 12 for w in slow)  # after one push each
    plain, slow = _round_batches(eager=False)
    assert all(plain[r][w] == 32 for r in (0, 1) for w in slow)
    assert all(plain[2][w] < 12 for w in slow)  # after three


def test_eager_does_not_trust_one_slow_link_leg() -> None:
    boards = {f"w{i}": Board(0.003) for i in range(8)}
    bal = joined(boards, eager=True)
    batches = bal.batches(boards)
    for wid, board in list(boards.items())[1:]:
        board.push(bal, wid, batches[wid])
    compute = 32 * 0.003
    bal.observe("w0", 32, compute, compute + 0.3)  # its first push: one retry
    assert bal.batches(boards)["w0"] == 32
    # nor later: a smaller batch saves compute, not link time
    for _ in range(10):
        bal.observe("w0", 32, compute, compute + 0.3)
    assert bal.batches(boards)["w0"] == 32
    bal.observe("w0", 32, 4 * compute, 4 * compute + 0.3)  # but slow compute counts
    for _ in range(6):
        bal.observe("w0", 32, 4 * compute, 4 * compute + 0.3)
    assert bal.batches(boards)["w0"] < 32


@pytest.mark.parametrize("balance", [False, True])
def test_a_board_with_a_small_shard_computes_its_rows_and_announces_them(
    balance: bool,
) -> None:
    from edgeps.sim.simulator import Simulator
    from edgeps.sim.types import SimConfig
    from edgeps.workloads.scenarios import BASE_COMPUTE, FIXED_FRACTION

    cfg = SimConfig(
        policy="asp",
        scenario="homogeneous",
        n_workers=64,
        dataset="digits",
        partition="labelmix:0.3",
        balance=balance,
        max_time=2.0,
    )
    sim = Simulator(cfg)
    sim.run()
    w = next(iter(sim.workers.values()))
    rows = len(w.y)
    assert rows < cfg.batch_size and w.cap == rows
    per_push = w.busy_time / w.clock
    expected = BASE_COMPUTE * (FIXED_FRACTION + (1 - FIXED_FRACTION) * rows / 32)
    assert per_push == pytest.approx(expected, rel=0.1)
    if balance:
        assert sim.server.balancer is not None
        assert sim.server.balancer.weight(rows, w.worker_id) == 1.0
