"""`edgeps bench local`: its rows, medians and goals, and one real run on mosquitto."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from edgeps.lab.bench.local import (
    add_sim,
    from_logs,
    link_flags,
    links_of,
    per_board,
    run_args,
    sim_overrides,
)
from edgeps.lab.bench.local_table import (
    LocalRun,
    Row,
    best_local_goal,
    build_cells,
    failure_lines,
    fedbuff_goal,
    goals,
    median_time,
    parse_row,
    parse_rows,
    run_from_dict,
    sim_goal,
    table,
    training_time,
)
from edgeps.lab.bench.policies_table import BrokerRun

from tests.conftest import Broker


def _run(
    row: str,
    t: float | None,
    *,
    up: float = 1000.0,
    down: float = 1000.0,
    acc: float = 0.92,
    joules: float = 1.0,
    workers: int = 8,
    scenario: str = "slowlinks",
    seed: int = 0,
    error: str = "",
) -> LocalRun:
    tail = "Traceback\nBoom" if error else ""
    b = BrokerRun(parse_row(row).policy, scenario, False, seed, t, acc, 100,
                  error=error, stderr_tail=tail)  # fmt: skip
    return LocalRun(workers, scenario, parse_row(row).name, b, up, down, joules)


def _cells(runs: list[LocalRun]) -> list:
    keys = list(dict.fromkeys((r.workers, r.scenario, r.row) for r in runs))
    return build_cells(keys, runs)


def test_rows_name_the_policy_steps_and_codecs_and_give_serve_its_flags() -> None:
    assert parse_row("dsp") == Row("dsp", 1)
    assert parse_row("fedbuff:k=4/h8") == Row("fedbuff:k=4", 8)
    assert parse_row("dsp/h8/int8/int8") == Row("dsp", 8, "int8", "int8")
    assert (
        parse_row("fedavg:k=4,deadline=5/int8").name
        == "fedavg:k=4,deadline=5/h1/int8/f32"
    )
    assert [r.name for r in parse_rows("dsp; fedavg/h8  dsp/h8/int8/int8")] == [
        "dsp/h1", "fedavg/h8", "dsp/h8/int8/int8",
    ]  # fmt: skip
    assert Row("dsp", 1).serve_flags() == []  # today's serve takes it as is
    assert Row("dsp", 8, "int8", "int8").serve_flags() == [
        "--local-steps", "8", "--compress", "int8", "--compress-down", "int8",
    ]  # fmt: skip
    for bad in ("", "dsp/h0", "dsp//int8", "dsp/h8/int8/int8/f16"):
        with pytest.raises(ValueError):
            parse_rows(bad)


def test_a_run_gets_the_rows_flags_and_the_energy_model() -> None:
    args = argparse.Namespace(max_time=30.0, target_accuracy=None, board="pi",
                              sleep_at_barrier=True, serve_args="--quiet",
                              emulate_args="")  # fmt: skip

    got = run_args(args, Row("fedavg", 8), 64)

    assert got.workers == 64 and got.max_time == 30.0
    assert got.serve_args == "--local-steps 8 --quiet"
    assert got.emulate_args == "--board pi --sleep-at-barrier"


def test_link_flags_reach_emulate_as_emulate_parses_them() -> None:
    from edgeps.netem.units import parse_duration, parse_loss, parse_rate

    args = argparse.Namespace(max_time=30.0, target_accuracy=None, board="esp32",
                              sleep_at_barrier=False, serve_args="",
                              emulate_args="", link_rate=64000.0, link_delay=0.02,
                              link_loss=None)  # fmt: skip

    got = run_args(args, Row("dsp"), 8).emulate_args.split()

    assert links_of(args) == {"link_rate": 64000.0, "link_delay": 0.02}
    assert got == ["--board", "esp32", "--link-rate", "64000bit",
                   "--link-delay", "0.02s"]  # fmt: skip
    assert parse_rate(got[3]) == 64000.0 and parse_duration(got[5]) == 0.02
    assert link_flags({"link_loss": 0.01}) == ["--link-loss", "0.01"]
    assert parse_loss("0.01") == 0.01
    assert links_of(argparse.Namespace()) == {}


def test_the_simulator_follows_each_broker_run_its_seed_and_join_times() -> None:
    # Prepare: one cell, two runs; the second's sensors joined over 1.5 s
    args = argparse.Namespace(target_accuracy=None, board="esp32", seed=0, seeds=2,
                              sleep_at_barrier=False, max_time=20.0,
                              link_rate=None)  # fmt: skip
    runs = [_run("dsp", 3.0, scenario="homogeneous"),
            _run("dsp", 3.0, scenario="homogeneous", seed=1)]  # fmt: skip
    runs[1].broker.joins = [0.0] * 4 + [1.5] * 4
    (cell,) = _cells(runs)

    # Execute
    over = sim_overrides(args, parse_row("fedbuff:k=4/h8/int8/int8"), [0.0, 0.5])
    add_sim([cell], [parse_row("dsp")], args)

    # Assert: the row's codecs, the run's joins, and a stop at the target
    assert over["compress"] == over["compress_down"] == "int8"
    assert over["join_times"] == (0.0, 0.5) and over["stop_at_target"] is True
    assert "link_rate" not in over
    assert cell.sim_time is not None and 0 < cell.sim_time <= 20.0
    assert cell.sim_bytes_up is not None and cell.sim_bytes_up > 0


def test_per_board_reads_emulates_json_or_nothing(tmp_path: Path) -> None:
    good, bad = tmp_path / "a.out", tmp_path / "b.out"
    good.write_text(json.dumps({"per_board": {"bytes_up": 5.0, "joules": 1.5}}))
    bad.write_text("Traceback ...")

    assert per_board(good) == {"bytes_up": 5.0, "joules": 1.5}
    assert per_board(bad) == {} and per_board(tmp_path / "missing") == {}


def test_medians_count_a_miss_as_slower_than_every_hit_and_skip_failures() -> None:
    runs = [_run("dsp", 9.0, up=100), _run("dsp", None, up=300, seed=1),
            _run("dsp", 5.0, up=200, seed=2),
            _run("dsp", 1.0, up=1, seed=3, error="serve exited 2")]  # fmt: skip

    (cell,) = _cells(runs)

    assert median_time([1.0, None, None]) is None
    assert cell.time == 9.0 and cell.reached == 2
    assert cell.bytes_up == 200.0 and cell.bytes_total == 1200.0
    assert len(cell.ok) == 3 and len(cell.failures) == 1
    assert cell.to_dict()["failed_runs"] == 1
    assert (
        failure_lines([cell])[0] == "FAILED 8 slowlinks dsp/h1 seed 3: serve exited 2"
    )
    assert "    Boom" in failure_lines([cell])


def test_the_best_local_row_is_checked_against_per_step_dsp() -> None:
    # Prepare: dsp/h1 10 s with 60 kB a board; fedbuff/h8 4 s with 10 kB
    # (6x fewer, 2.5x sooner, 0.3 point lower); fedavg/h8 fewer bytes but slow
    runs = [
        _run("dsp", 10.0, up=30000, down=30000, acc=0.925),
        _run("fedbuff:k=4/h8", 4.0, up=5000, down=5000, acc=0.922),
        _run("fedavg/h8", 20.0, up=2000, down=2000, acc=0.93),
    ]

    goal = best_local_goal(_cells(runs), 8)

    assert goal.met is True
    assert "fedbuff:k=4/h8: 6.0x fewer bytes" in goal.text
    assert "2.50x sooner" in goal.text and "0.922 vs 0.925" in goal.text


@pytest.mark.parametrize(
    ("up", "t", "acc", "why"),
    [(7000, 4.0, 0.925, "4.3x fewer"), (5000, 6.0, 0.925, "1.67x sooner"),
     (5000, 4.0, 0.915, "0.915 vs 0.925")],
)  # fmt: skip
def test_a_local_row_short_on_any_count_does_not_meet_it(
    up: float, t: float, acc: float, why: str
) -> None:
    runs = [_run("dsp", 10.0, up=30000, down=30000, acc=0.925),
            _run("dsp/h8", t, up=up, down=up, acc=acc)]  # fmt: skip

    goal = best_local_goal(_cells(runs), 8)

    assert goal.met is False and why in goal.text
    assert "NOT MET" in goal.line()


def test_the_local_goal_is_unchecked_without_a_baseline_or_local_rows() -> None:
    missed = [_run("dsp", None), _run("dsp/h8", 3.0)]
    alone = [_run("dsp", 5.0)]

    assert best_local_goal(_cells(missed), 8).met is None
    assert best_local_goal(_cells(alone), 8).met is None
    assert (
        best_local_goal(_cells([_run("dsp", 5.0), _run("dsp/h8", None)]), 8).met
        is False
    )


def _strag(row: str, t: float | None) -> LocalRun:
    return _run(row, t, scenario="stragglers", workers=64)


def test_fedbuff_against_fedavg_on_stragglers() -> None:
    fast = [_strag("fedavg/h8", 30.0), _strag("fedbuff:k=4/h8", 12.0)]
    close = [_strag("fedavg/h8", 20.0), _strag("fedbuff:k=4/h8", 12.0)]
    avg_missed = [_strag("fedavg/h8", None), _strag("fedbuff:k=4/h8", 25.0)]

    assert fedbuff_goal(_cells(fast), 64, 60.0).met is True
    no = fedbuff_goal(_cells(close), 64, 60.0)
    assert no.met is False and "1.67x sooner" in no.text
    # fedavg missed in 60 s: fedbuff at 25 s is at least 2.4x sooner
    bound = fedbuff_goal(_cells(avg_missed), 64, 60.0)
    assert bound.met is True and "at least 2.40x" in bound.text


def test_the_simulator_must_be_within_a_fifth_on_every_cell() -> None:
    cells = _cells([_run("dsp", 10.0), _run("dsp/h8", 10.0), _run("fedavg/h8", None),
                    _run("fedbuff:k=4/h8", 6.0)])  # fmt: skip
    cells[0].sim_time = 9.0  # 1.11x: within
    cells[1].sim_time = 7.0  # 1.43x: outside
    cells[2].sim_time = None  # both missed: not compared
    cells[3].sim_time = None  # the simulator missed where the broker reached

    goal = sim_goal(cells)

    assert goal.met is False
    assert "1 of 3 cells within" in goal.text
    assert "8/slowlinks/dsp/h8/f32" not in goal.text  # names are the rows'
    assert "8/slowlinks/dsp/h8 1.43x" in goal.text
    assert "fedbuff:k=4/h8 (the simulator missed)" in goal.text
    cells[1].sim_time = 9.5
    cells[3].sim_time = 5.5
    assert sim_goal(cells).met is True


def test_training_time_runs_from_the_first_update_and_joins_are_spanned() -> None:
    runs = [_run("dsp", 3.0), _run("dsp", 5.0, seed=1), _run("dsp", None, seed=2)]
    runs[0].broker.first_update, runs[0].broker.joins = 0.5, [0.0, 0.1, 0.4]
    runs[1].broker.first_update, runs[1].broker.joins = 1.0, [0.0, 0.2]
    runs[2].broker.first_update = 0.2  # missed: no training time

    (cell,) = _cells(runs)

    assert training_time(runs[0].broker) == 2.5
    assert training_time(runs[2].broker) is None
    assert training_time(_run("dsp", 4.0).broker) is None  # no UPDATE seen
    assert cell.train_time == 4.0  # 2.5, 4.0 and a miss: the miss is slowest
    assert cell.join_span == pytest.approx(0.3)
    assert cell.to_dict()["train_time"] == 4.0
    assert run_from_dict(runs[0].to_dict()) == runs[0]


def test_bytes_per_board_stop_at_the_target_without_the_closing_messages() -> None:
    runs = [_run("dsp", 3.0, up=1000, down=9000), _run("dsp", 4.0, seed=1)]
    runs[0].broker.closing_up, runs[0].broker.closing_down = 40.0, 5240.0

    (cell,) = _cells(runs)

    assert runs[0].up_to_target == 960.0 and runs[0].down_to_target == 3760.0
    assert runs[1].up_to_target == 1000.0  # nothing seen past done: as reported
    assert cell.bytes_up == 980.0 and cell.bytes_total == (4720.0 + 2000.0) / 2
    assert run_from_dict(runs[0].to_dict()) == runs[0]


def test_the_table_and_goal_lines_carry_every_column() -> None:
    runs = [_run("dsp", 10.0, up=30000, down=31000, acc=0.925, joules=4.5),
            _run("fedbuff:k=4/h8", 4.0, up=5000, down=5000, joules=1.25)]  # fmt: skip
    cells = _cells(runs)
    cells[0].sim_time = 8.0

    text = table(cells)
    lines = goals(cells, 60.0)

    head, _, dsp, fedbuff = text.splitlines()
    for col in ("up B/board", "down B/board", "s", "train s", "final acc", "J/board",
                "sim s"):  # fmt: skip
        assert col in head
    assert dsp.split() == ["8", "slowlinks", "dsp/h1", "30000", "31000", "10.0",
                           "-", "0.925", "4.50", "1/1", "8.0", "1.25"]  # fmt: skip
    assert fedbuff.split()[-2:] == ["-", "-"]
    assert [g.name.split(",")[0] for g in lines] == [
        "local rounds vs dsp/h1", "simulator within 20% of the broker",
    ]  # fmt: skip
    assert "sim s" not in table(cells, with_sim=False)
    assert len(goals(cells, 60.0, with_sim=False)) == 1


def test_logged_runs_come_back_as_the_same_table(tmp_path: Path) -> None:
    # Prepare: two runs of one cell and one of another, logged one per line
    runs = [_run("dsp", 10.0, up=300), _run("dsp", None, seed=1, up=100),
            _run("fedavg/h8", 20.0, scenario="stragglers", workers=64,
                 error="serve exited 1")]  # fmt: skip
    log = tmp_path / "runs.jsonl"
    log.write_text("".join(json.dumps(r.to_dict()) + "\n" for r in runs))
    args = argparse.Namespace(from_log=[log], no_sim=True)

    # Execute
    cells, info = from_logs(args)

    # Assert: the cells and what they say are the ones the runs give
    assert run_from_dict(runs[2].to_dict()) == runs[2]
    assert table(cells, with_sim=False) == table(_cells(runs), with_sim=False)
    assert [c.row for c in cells] == ["dsp/h1", "fedavg/h8"]
    assert args.seeds == 2 and args.workers == "8,64"
    assert len(info["runs"]) == 3


@pytest.mark.integration
@pytest.mark.slow
def test_one_small_table_on_mosquitto(
    mosquitto: Broker, capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute: per-step DSP, 4 sensors, one seed, both scenarios, bounded runs
    from edgeps.lab.bench import local

    parser = argparse.ArgumentParser()
    local.configure(parser)
    args = parser.parse_args(["--rows", "dsp", "--workers", "4", "--seeds", "1",
                              "--max-time", "20", "--json"])  # fmt: skip
    cells, info = local.measure(args, url=mosquitto.url)

    # Assert: one cell per scenario, from runs that trained and were metered
    assert [(c.scenario, c.row) for c in cells] == [
        ("stragglers", "dsp/h1"), ("slowlinks", "dsp/h1"),
    ]  # fmt: skip
    for c, run in zip(cells, info["runs"], strict=True):
        assert run["error"] == "" and run["updates"] > 0
        assert run["bytes_up"] > 0 and run["bytes_down"] > 0 and run["joules"] > 0
        assert 0.0 <= run["final_accuracy"] <= 1.0
        assert c.sim_time is not None or c.sim_joules is not None
        if run["time_to_target"] is not None:  # a busy box may miss in 20 s
            assert run["stop_reason"] == "target_accuracy"
