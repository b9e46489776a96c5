"""Which balancing mode a policy gets, and what eager does from a first push."""

from __future__ import annotations

import numpy as np
import pytest
from edgeps.core import Join, ParameterServer, Push, Release
from edgeps.core.balance import Balancer, eager_for
from edgeps.policy import parse_policy

from tests.core.test_balance import Board, run

BARRIER = ("bsp", "kofn:k=6", "kofn:auto")
NO_BARRIER = ("asp", "dsp", "dsp:w=2", "dsp:rounds=48", "ssp:3", "ssp:0", "dssp")


def joined(policy: str, boards: dict[str, Board], caps=None, **kw) -> Balancer:
    bal = Balancer.for_policy(parse_policy(policy), **kw)
    for wid in boards:
        bal.joined(wid, (caps or {}).get(wid, 0))
    return bal


@pytest.mark.parametrize("spec", BARRIER + NO_BARRIER)
def test_the_mode_follows_whether_the_policy_waits_for_rounds(spec: str) -> None:
    policy = parse_policy(spec)
    waits = spec in BARRIER
    assert policy.waits_for_rounds is waits
    assert eager_for(policy) is waits
    bal = Balancer.for_policy(policy, base_batch=16)
    assert bal.eager is waits and bal.base_batch == 16
    assert ("eager" in bal.describe()) is waits
    # an explicit choice wins over the policy's
    assert Balancer.for_policy(policy, eager=not waits).eager is (not waits)


@pytest.mark.parametrize(("spec", "eager"), [("bsp", True), ("dsp", False)])
def test_simulate_and_serve_choose_the_mode_by_policy(spec: str, eager: bool) -> None:
    from edgeps.runtime.config import ServeConfig
    from edgeps.runtime.job import build_server, load_model
    from edgeps.sim.simulator import Simulator
    from edgeps.sim.types import SimConfig

    sim = Simulator(SimConfig(policy=spec, balance=True, max_time=1.0))
    assert sim.server.balancer is not None and sim.server.balancer.eager is eager
    forced = Simulator(
        SimConfig(policy=spec, balance=True, balance_eager=not eager, max_time=1.0)
    )
    assert forced.server.balancer is not None
    assert forced.server.balancer.eager is (not eager)
    cfg = ServeConfig(policy=spec, balance=True)
    server, _ = build_server(cfg, load_model(cfg))
    assert server.balancer is not None and server.balancer.eager is eager


def test_simulate_flags_leave_the_mode_to_the_policy_unless_given() -> None:
    import argparse

    from edgeps.commands import simulate

    parser = argparse.ArgumentParser()
    simulate.configure(parser)
    for argv, want in (
        ([], None),
        (["--balance-eager"], True),
        (["--no-balance-eager"], False),
    ):
        args = parser.parse_args(["--balance", *argv])
        assert simulate._config(args).balance_eager is want


def test_eager_first_push_assignments_stay_within_each_board_cap() -> None:
    boards = {f"f{i}": Board(0.003) for i in range(5)}
    boards |= {"slow": Board(0.012), "capped_slow": Board(0.012)}
    boards |= {"capped_fast": Board(0.0005), "roomy": Board(0.0005)}
    caps = {"capped_slow": 5, "capped_fast": 40}
    bal = joined("bsp", boards, caps, max_batch=100)
    assert bal.eager
    history = run(bal, boards, 30)
    assert history[0]["capped_slow"] == 5 and history[0]["capped_fast"] == 32
    # from its first push: the slow boards shrink, the capped one to its cap
    assert history[1]["slow"] == pytest.approx(8, abs=1)
    assert all(h["capped_slow"] <= 5 for h in history)
    assert all(h["capped_fast"] <= 40 for h in history)
    assert history[1]["capped_fast"] == 40  # it would want far more
    assert history[1]["roomy"] > 40  # as the uncapped twin gets
    assert all(1 <= b <= 100 for h in history for b in h.values())


def test_the_core_releases_an_eager_assignment_within_the_announced_cap() -> None:
    ps = ParameterServer(
        np.zeros(4, np.float32),
        policy=parse_policy("bsp"),
        lr=0.1,
        balancer=Balancer.for_policy(parse_policy("bsp"), base_batch=32),
    )
    for wid, cap in (("a", 0), ("b", 0), ("c", 0), ("slow", 6)):
        ps.handle(Join(wid, max_batch=cap), 0.0)
    batches: dict[str, int] = {}
    for wid, per_sample in (("a", 0.003), ("b", 0.003), ("c", 0.003)):
        ps.handle(_push(wid, 32, 32 * per_sample), 0.2)
    actions = ps.handle(_push("slow", 6, 6 * 0.1), 0.7)  # 30x slower per sample
    for action in actions:
        if isinstance(action, Release) and action.batches:
            batches |= action.batches
    assert set(batches) == {"a", "b", "c", "slow"}  # the round, after one push
    assert 2 <= batches["slow"] < 6  # assigned at once, within its cap
    assert batches["a"] == 32


def _push(wid: str, samples: int, compute: float) -> Push:
    return Push(
        wid, 1, 1, 0, np.ones(4, np.float32), compute_time=compute, samples=samples
    )


@pytest.mark.parametrize("spec", ["bsp", "kofn:auto"])
def test_a_first_push_spike_costs_one_iteration_and_nothing_oscillates(
    spec: str,
) -> None:
    rng = np.random.default_rng(11)
    boards = {f"w{i}": Board(0.003) for i in range(6)}
    boards |= {"s0": Board(0.012), "s1": Board(0.012)}
    spikes = {(w, r): 5.0 for w in boards for r in range(3, 300) if rng.random() < 0.1}
    spikes[("w0", 0)] = 5.0  # its very first push is a spike
    bal = joined(spec, boards)
    history = run(bal, boards, 300, spikes)
    assert history[1]["w0"] < 32  # one push only bounded its pace
    assert all(h["w0"] == 32 for h in history[2:])  # its second corrected it
    assert all(
        h[w] == 32 for h in history for w in boards if w not in ("w0", "s0", "s1")
    )
    assert all(history[1][s] == pytest.approx(8, abs=1) for s in ("s0", "s1"))
    # settled from the second round: spikes in 10% of pushes move nothing
    assert all(h == history[-1] for h in history[2:])
    assert bal.changes == 4  # w0 down and back, each straggler once


@pytest.mark.parametrize("spec", ["asp", "dsp", "ssp:3", "dssp"])
def test_in_the_warm_up_mode_a_first_push_spike_moves_nothing(spec: str) -> None:
    boards = {f"w{i}": Board(0.003) for i in range(8)}
    bal = joined(spec, boards)
    history = run(bal, boards, 50, {("w0", 0): 5.0, ("w0", 1): 5.0})
    assert not bal.eager
    assert all(b == 32 for h in history for b in h.values())
    assert bal.changes == 0


@pytest.mark.parametrize(
    ("mode", "bsp_eager", "asp_eager"),
    [(None, True, False), (True, True, True), (False, False, False)],
)
def test_the_matrix_runs_each_cell_in_the_mode_asked(
    mode: bool | None, bsp_eager: bool, asp_eager: bool
) -> None:
    from edgeps.lab.matrix import grid as matrix
    from edgeps.sim.simulator import Simulator

    cell = matrix.Cell("sensors", 8, "stragglers", True)
    for spec, want in (("bsp", bsp_eager), ("asp", asp_eager)):
        sim = Simulator(matrix.config(cell, spec, 0, 1.0, mode))
        assert sim.server.balancer is not None and sim.server.balancer.eager is want


def test_the_matrix_command_takes_and_reports_the_mode(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from edgeps.cli import main

    tiny = ["bench", "policies", "--matrix", "--scenarios", "stragglers"]
    tiny += ["--datasets", "sensors", "--sizes", "4", "--seeds", "1"]
    tiny += ["--max-time", "1", "--policies", "bsp", "--balance", "on", "--jobs", "1"]
    assert main([*tiny, "--balance-mode", "warmup", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["balance_mode"] == "warmup"
    assert main([*tiny, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["balance_mode"] == "policy"
    with pytest.raises(SystemExit):
        main([*tiny, "--balance-mode", "sometimes"])
