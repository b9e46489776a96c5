"""Conv rows of `edgeps bench policies-broker`: the scaled job, first choices, a run."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import pytest
from edgeps.cli import main
from edgeps.commands import emulate as emulate_cmd
from edgeps.commands import simulate as simulate_cmd
from edgeps.lab.bench import policies_conv as convjob
from edgeps.lab.bench.policies_broker import emulate_command, serve_command
from edgeps.lab.bench.policies_table import (
    BrokerRun,
    agreement_line,
    build_rows,
    table,
)
from edgeps.lab.matrix import conv
from edgeps.lab.matrix.grid import Cell, CellResult, Entry
from edgeps.workloads.scenarios import BASE_COMPUTE, make_scenario

from tests.conftest import mosquitto_path

BM = Cell("basicmotions", 8, "disturbed", False)
M1 = Cell("mnist1d", 8, "stragglers", False)


def _real(cell: Cell, policy: str, t: float | None, acc: float = 0.9) -> BrokerRun:
    return BrokerRun(policy, cell.scenario, cell.balance, 0, t, acc, 50,
                     dataset=cell.dataset)  # fmt: skip


def _sim(cell: Cell, times: dict[str, tuple[float | None, float]]) -> CellResult:
    out = CellResult(cell)
    for p, (t, acc) in times.items():
        out.entries[p] = Entry(p, [t], [acc], [1])
    return out


# -- first choices --


def test_a_real_first_among_the_simulators_tied_firsts_agrees() -> None:
    # Prepare: the simulator gives asp and dsp the same time and accuracy
    runs = [_real(BM, "asp", 9.0), _real(BM, "dsp", 8.0), _real(BM, "bsp", 12.0)]
    sim = _sim(BM, {"bsp": (14.0, 0.9), "asp": (11.0, 0.92), "dsp": (11.0, 0.92)})

    # Execute
    (row,) = build_rows([BM], runs, sim_cells=[sim])

    # Assert: real dsp is one of the simulator's firsts; strictly it said asp
    assert row.best() == "dsp"
    assert row.sim_firsts() == ["asp", "dsp"]
    assert row.agrees() is True
    assert "in 1 of 1 rows (0 of 1 counting only its own first" in agreement_line([row])


def test_a_different_first_choice_disagrees_and_the_table_says_so() -> None:
    runs = [_real(M1, "bsp", None), _real(M1, "asp", 20.0), _real(M1, "dsp", 25.0)]
    sim = _sim(M1, {"bsp": (None, 0.5), "asp": (19.0, 0.8), "dsp": (18.0, 0.8)})

    (row,) = build_rows([M1], runs, sim_cells=[sim])
    text = table([row], ["bsp", "asp", "dsp"])

    assert row.best() == "asp" and row.sim_firsts() == ["dsp"]
    assert row.agrees() is False
    line = text.splitlines()[2]
    assert line.startswith("mnist1d") and line.rstrip().endswith("asp / dsp NO")
    assert "20.0 0.900* | 19.0 1.05x" in line  # the sim's time beside the real one
    d = row.to_dict(["bsp", "asp", "dsp"])
    assert d["sim_best"] == "dsp" and d["agrees"] is False


def test_nobody_reaching_the_target_on_either_side_agrees() -> None:
    runs = [_real(M1, "bsp", None), _real(M1, "asp", None)]
    sim = _sim(M1, {"bsp": (None, 0.5), "asp": (None, 0.6)})

    (row,) = build_rows([M1], runs, sim_cells=[sim])

    assert row.best() is None and row.sim_firsts() == []
    assert row.agrees() is True
    assert "none / none yes" in table([row], ["bsp", "asp"])


def test_rows_without_a_simulator_cell_are_not_judged() -> None:
    (a,) = build_rows([BM], [_real(BM, "asp", 9.0)])
    (b,) = build_rows(
        [M1], [_real(M1, "asp", 9.0)], sim_cells=[_sim(M1, {"asp": (8.0, 0.9)})]
    )

    assert a.agrees() is None
    assert agreement_line([a, b]).startswith(
        "simulator's first choice = real in 1 of 1 rows"
    )


def test_runs_of_two_datasets_go_to_their_own_rows() -> None:
    runs = [_real(BM, "asp", 9.0), _real(M1, "asp", 20.0)]
    m1_disturbed = Cell("mnist1d", 8, "disturbed", False)

    with pytest.raises(ValueError, match="outside the grid"):
        build_rows([BM], [_real(m1_disturbed, "asp", 1.0)])
    bm, m1 = build_rows([BM, M1], runs)

    assert bm.real.entries["asp"].time == 9.0 and m1.real.entries["asp"].time == 20.0


# -- the scaled job --


def test_disturbed_bursts_follow_the_time_scale_and_churn_refuses_one() -> None:
    text = convjob.scaled_scenario("disturbed", 8.0)
    fast = make_scenario(text, 8, 3)
    slow = make_scenario("disturbed", 8, 3)

    (b,) = [p.bursts for p in fast.profiles.values() if p.bursts]
    (b0,) = [p.bursts for p in slow.profiles.values() if p.bursts]
    assert b.burst == pytest.approx(b0.burst / 8)
    assert b.period == pytest.approx(b0.period / 8)
    assert b.share == b0.share
    assert convjob.scaled_scenario("stragglers", 8.0) == "stragglers"
    assert convjob.scaled_scenario("churn", 1.0) == "churn"
    with pytest.raises(ValueError, match="churn cannot be time-scaled"):
        convjob.scaled_scenario("churn", 2.0)
    with pytest.raises(ValueError, match=">= 1"):
        convjob.time_scale("mnist1d", 0.5)


def test_the_scaled_job_is_the_matrix_cell_with_its_times_divided() -> None:
    job = conv.JOBS["mnist1d"]

    cfg = convjob.sim_config(M1, "dsp", 1, 8.0)

    assert cfg.compute_time == pytest.approx(BASE_COMPUTE / 8)
    assert cfg.eval_interval == pytest.approx(job.eval_interval / 8)
    assert cfg.max_time == pytest.approx(job.max_time_at(8) / 8)
    assert (cfg.optimizer, cfg.lr, cfg.target_accuracy) == ("adam", job.lr, job.target)
    assert (cfg.partition, cfg.batch_size, cfg.seed) == ("iid", job.batch, 1)
    assert cfg.emulator_cpu_us > 0  # the sensors' CPU is the host's


def test_basicmotions_takes_its_8_row_shards_as_its_batch() -> None:
    # 40 training windows over 8 boards: each draws 8, which the simulator
    # charges and the emulator (asked 32) would not
    cfg = convjob.sim_config(BM, "asp", 0, 2.0)

    assert cfg.batch_size == 8 == convjob.smallest_shard(cfg)
    assert cfg.partition == conv.JOBS["basicmotions"].partition


def test_simulate_compare_flags_build_the_same_job() -> None:
    # Prepare: the command the bench prints for the simulator's first choice
    cfg = convjob.sim_config(BM, "asp", 2, 2.0)
    argv = convjob.simulate_command(cfg, ["bsp", "asp"], 3)
    parser = argparse.ArgumentParser()
    simulate_cmd.configure(parser)

    # Execute: `edgeps simulate`'s own parsing of those flags
    args = parser.parse_args(argv[2:])
    built = simulate_cmd._config(args)

    # Assert: the same SimConfig but for the policy, which --compare sets
    assert dataclasses.replace(built, policy=cfg.policy) == cfg
    assert args.compare == "bsp,asp" and args.seeds == 3


def test_serve_and_emulate_get_the_scaled_job() -> None:
    args = argparse.Namespace(
        workers=8, max_time=None, target_accuracy=None, time_scale=None
    )
    cfg = convjob.sim_config(BM, "dsp", 0, convjob.TIME_SCALE["basicmotions"])

    serve = serve_command("mqtt://h:1", "j", "dsp", False, 0, args,
                          "basicmotions", "disturbed")  # fmt: skip
    emu = emulate_command("mqtt://h:1", "j", "disturbed", 0, args, "basicmotions")

    def flag(cmd: list[str], name: str) -> str:
        return cmd[cmd.index(name) + 1]

    assert flag(serve, "--optimizer") == "adam"
    assert float(flag(serve, "--eval-interval")) == cfg.eval_interval
    assert float(flag(serve, "--max-time")) == cfg.max_time
    assert float(flag(serve, "--target-accuracy")) == cfg.target_accuracy
    assert flag(emu, "--scenario") == cfg.scenario != "disturbed"
    assert float(flag(emu, "--compute-time")) == cfg.compute_time
    assert flag(emu, "--batch") == "8" and flag(emu, "--partition") == cfg.partition


def test_emulate_takes_a_disturbed_scenario_and_a_partition() -> None:
    parser = argparse.ArgumentParser()
    emulate_cmd.configure(parser)
    base = ["--broker", "mqtt://h:1", "--job", "j", "--partition", "labelmix:100"]

    args = parser.parse_args([*base, "--scenario", "disturbed:burst=1,period=3"])

    assert args.scenario == "disturbed:burst=1,period=3"
    assert emulate_cmd._partition(args.partition) == "labelmix:100"
    with pytest.raises(ValueError, match="bad --partition"):
        emulate_cmd._partition("labelmix:x")
    for bad in ("stragglers:x=1", "disturbed:burst", "nosuch"):
        with pytest.raises(SystemExit):
            parser.parse_args([*base, "--scenario", bad])


def test_simulate_compute_time_sets_every_boards_base_before_flops() -> None:
    from edgeps.sim.simulator import Simulator
    from edgeps.sim.types import SimConfig
    from edgeps.workloads.scenarios import compute_scale

    cfg = SimConfig(dataset="mnist1d", scenario="stragglers", compute_time=0.01)

    sim = Simulator(cfg)

    scale = compute_scale(sim.spec.macs, sim.spec.n_params)
    times = sorted(w.profile.typical_compute for w in sim.workers.values())
    assert times[0] == pytest.approx(0.01 * scale)
    assert times[-1] == pytest.approx(0.04 * scale)  # a straggler stays 4x
    with pytest.raises(ValueError, match="compute_time"):
        SimConfig(compute_time=0.0)


def test_join_reads_slices_back_into_one_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare: two slices' --json, as the bench writes them
    files = []
    for i, cell in enumerate((BM, M1)):
        row = {"dataset": cell.dataset, "workers": 8, "scenario": cell.scenario,
               "balance": False, "cells": [{"policy": "asp"}]}  # fmt: skip
        run = dataclasses.asdict(_real(cell, "asp", 5.0 + i))
        path = tmp_path / f"s{i}.json"
        path.write_text(json.dumps({"rows": [row], "runs": [run], "wall_seconds": 9}))
        files.append(str(path))

    # Execute
    code = main(["bench", "policies-broker", "--join", ",".join(files), "--no-sim"])

    # Assert
    out = capsys.readouterr().out
    assert code == 0
    assert "basicmotions  8  disturbed" in out and "mnist1d       8  stragglers" in out
    assert "2 runs in 18 s wall" in out
    assert main(["bench", "policies-broker", "--join", str(tmp_path / "no")]) == 2


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed")
def test_one_real_conv_cell_on_mosquitto(capsys: pytest.CaptureFixture[str]) -> None:
    # Execute: BasicMotions' conv job, asp, disturbed, one seed, at most 12 s
    # of training (serve is bounded by --max-time, the bench kills the rest)
    code = main(["bench", "policies-broker", "--dataset", "basicmotions",
                 "--policies", "asp", "--scenarios", "disturbed", "--seeds", "1",
                 "--balance", "off", "--max-time", "12", "--json"])  # fmt: skip

    # Assert: a run that really trained the conv model, and the simulator's cell
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    (row,) = out["rows"]
    (run,) = out["runs"]
    assert run["error"] == "" and run["dataset"] == "basicmotions"
    assert run["updates"] > 0 and 0.0 <= run["final_accuracy"] <= 1.0
    assert row["sim_best"] in (None, "asp") and row["agrees"] in (True, False)
    assert out["agreement"].startswith("simulator's first choice = real in")
    assert out["config"]["max_time"] == {"basicmotions": 12.0}


def test_a_policy_with_two_options_stays_one_policy() -> None:
    from edgeps.lab.bench.policies_broker import policy_list

    assert policy_list("bsp,dsp:rounds=8,damp=1,asp") == [
        "bsp",
        "dsp:rounds=8,damp=1",
        "asp",
    ]
