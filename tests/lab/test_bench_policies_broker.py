"""`edgeps bench policies-broker`: its table logic, and one real run on mosquitto."""

from __future__ import annotations

import argparse
import json

import pytest
from edgeps.cli import main
from edgeps.core.defaults import JOB
from edgeps.lab.bench.policies_broker import _fill, emulate_command, serve_command
from edgeps.lab.bench.policies_table import BrokerRun, build_rows, failure_lines, table
from edgeps.lab.matrix.grid import DATASETS, Cell

from tests.conftest import mosquitto_path

OFF = Cell("sensors", 8, "stragglers", False)
ON = Cell("sensors", 8, "stragglers", True)


def _run(
    policy: str,
    t: float | None,
    acc: float = 0.92,
    *,
    balance: bool = False,
    seed: int = 0,
    error: str = "",
    stderr_tail: str = "",
) -> BrokerRun:
    return BrokerRun(policy, "stragglers", balance, seed, t, acc, 100,
                     error=error, stderr_tail=stderr_tail)  # fmt: skip


def test_cell_median_counts_a_missed_target_as_slower_than_every_hit() -> None:
    # Prepare: bsp hits twice and misses once; asp misses twice
    runs = [_run("bsp", 9.0), _run("bsp", None), _run("bsp", 5.0)]
    runs += [_run("asp", 2.0), _run("asp", None), _run("asp", None)]

    # Execute
    (row,) = build_rows([OFF], runs)

    # Assert: bsp's median is its slower hit; asp's median is a miss
    assert row.real.entries["bsp"].time == 9.0
    assert row.real.entries["asp"].time is None
    assert row.best() == "bsp"


def test_best_is_the_soonest_then_the_more_accurate() -> None:
    runs = [_run("bsp", 12.0, 0.93), _run("asp", 4.0, 0.92), _run("dsp", 4.0, 0.94)]

    (row,) = build_rows([OFF], runs)
    text = table([row], ["bsp", "asp", "dsp"], with_sim=False)

    assert row.best() == "dsp"
    line = text.splitlines()[2]
    assert "4.0 0.940*" in line and "12.0 0.930 " in line and "4.0 0.920 " in line
    assert line.count("*") == 1


def test_rows_follow_the_grid_and_carry_the_sim_ratio() -> None:
    runs = [_run("bsp", 12.0), _run("bsp", 6.0, balance=True)]
    sim = {(OFF, "bsp"): 10.0, (ON, "bsp"): None}

    off, on = build_rows([OFF, ON], runs, sim)

    assert off.ratio("bsp") == pytest.approx(1.2)
    assert on.ratio("bsp") is None  # the simulator missed the target there
    text = table([off, on], ["bsp"])
    assert "12.0 0.920* | 10.0 1.20x" in text
    assert "6.0 0.920* | - -x" in text
    d = off.to_dict(["bsp"])
    assert d["cells"][0]["real_over_sim"] == pytest.approx(1.2)
    assert d["best"] == "bsp" and d["balance"] is False


def test_a_failed_run_is_shown_with_its_stderr_tail_never_dropped() -> None:
    bad = _run("dsp", None, error="serve exited 2", stderr_tail="Traceback\nBoom")
    runs = [_run("bsp", 9.0), bad, _run("asp", 3.0), _run("asp", None, seed=1)]
    runs.append(_run("asp", None, seed=2, error="emulate exited 1"))

    (row,) = build_rows([OFF], runs)
    text = table([row], ["bsp", "asp", "dsp"], with_sim=False)
    lines = failure_lines([row])

    assert "failed" in text.splitlines()[2]  # dsp: no run produced a result
    assert "f1" in text.splitlines()[2]  # asp: one of its three runs failed
    assert row.to_dict(["asp"])["cells"][0]["failed_runs"] == 1
    assert row.best() == "bsp"  # asp's median over its good runs is a miss
    assert any("dsp stragglers balance off seed 0: serve exited 2" in x for x in lines)
    assert "    Boom" in lines


def test_a_run_outside_the_grid_is_a_caller_mistake() -> None:
    with pytest.raises(ValueError):
        build_rows([OFF], [_run("bsp", 1.0, balance=True)])


def test_serve_gets_the_matrix_target_the_sim_lr_and_balance() -> None:
    args = argparse.Namespace(workers=8, max_time=40.0)

    on = serve_command("mqtt://h:1", "j", "dsp", True, 2, args)
    off = serve_command("mqtt://h:1", "j", "dsp", False, 2, args)
    emu = emulate_command("mqtt://h:1", "j", "lossy", 2, args)

    assert "--balance" in on and "--balance" not in off
    target = on[on.index("--target-accuracy") + 1]
    assert float(target) == DATASETS["sensors"][1]
    # the simulator's step, which is the job default: serve runs the same job
    assert float(on[on.index("--lr") + 1]) == JOB.lr
    assert on[on.index("--seed") + 1] == "2"
    assert emu[emu.index("--scenario") + 1] == "lossy"
    assert emu[emu.index("--seed") + 1] == "2"


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed")
def test_one_real_cell_on_mosquitto(capsys: pytest.CaptureFixture[str]) -> None:
    # Execute: asp, stragglers, 1 seed, balancing off; serve is bounded by
    # --max-time and the bench kills what outlives it
    code = main(["bench", "policies-broker", "--policies", "asp", "--scenarios",
                 "stragglers", "--seeds", "1", "--balance", "off", "--max-time",
                 "20", "--json"])  # fmt: skip

    # Assert: one row with one cell, from a run that really trained
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    (row,) = out["rows"]
    (cell,) = row["cells"]
    (run,) = out["runs"]
    assert run["error"] == "" and cell["failed_runs"] == 0 and cell["ok_runs"] == 1
    assert run["updates"] > 0
    assert isinstance(run["final_accuracy"], float)
    assert 0.0 <= run["final_accuracy"] <= 1.0
    assert cell["final_accuracy"] == run["final_accuracy"]
    assert cell["sim_time_to_target"] is not None
    if run["time_to_target"] is not None:  # on a busy box it may miss in 20 s
        assert run["stop_reason"] == "target_accuracy" and run["time_to_target"] > 0


@pytest.mark.integration
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed")
def test_a_serve_that_fails_is_a_failed_cell_with_its_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Execute: serve refuses a flag it does not know and exits 2 at once
    code = main(["bench", "policies-broker", "--policies", "bsp", "--scenarios",
                 "stragglers", "--seeds", "1", "--balance", "off", "--max-time",
                 "10", "--no-sim", "--serve-args=--no-such-flag"])  # fmt: skip

    # Assert: the bench ends normally and shows the run as failed, with why
    out = capsys.readouterr().out
    assert code == 0
    row = out.splitlines()[3]
    assert row.startswith("stragglers") and "failed" in row
    assert "FAILED bsp stragglers balance off seed 0: serve exited 2" in out
    assert "unrecognized arguments: --no-such-flag" in out


class _Seen:
    """What the compression bench's broker client saw: a HELLO, then done."""

    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.first_hello, self.done_at = 1.0, 4.5
        self.hellos = {"w01": 1.25, "w00": 1.0}
        self.first_update = 1.75


@pytest.mark.parametrize("acc", [None, "0.9", float("nan")])
def test_a_run_whose_serve_gave_no_accuracy_is_failed_not_a_nan(acc: object) -> None:
    run = _run("asp", None)
    run.final_accuracy = None
    summary = {"accuracy": acc, "stop_reason": "target_accuracy", "updates": 9}
    _fill(run, summary, _Seen())
    assert run.failed and "no final accuracy" in run.error
    assert run.time_to_target is None


def test_a_run_that_reached_its_target_times_from_the_first_hello() -> None:
    run = _run("asp", None)
    summary = {"accuracy": 0.915, "stop_reason": "target_accuracy", "updates": 9}
    _fill(run, summary, _Seen())
    assert not run.failed
    assert run.time_to_target == pytest.approx(3.5)
    assert run.joins == [0.0, 0.25] and run.first_update == pytest.approx(0.75)
    assert run.final_accuracy == pytest.approx(0.915)


def test_the_closing_messages_past_done_are_counted_per_sensor() -> None:
    import threading
    from types import SimpleNamespace

    from edgeps.lab.bench.compression import Sniffer
    from edgeps_worker import wire_host as wire

    # Prepare: a sniffer's state without its client, and the job's real messages
    sniff = Sniffer.__new__(Sniffer)
    sniff.wire, sniff.lock, sniff.bad = wire, threading.Lock(), 0
    sniff.host_bytes = sniff.update_bytes = sniff.params_bytes = 0
    sniff.release_msgs, sniff.updates, sniff.releases = 0, set(), set()
    sniff.first_hello = sniff.done_at = sniff.first_update = None
    sniff.hellos, sniff.closing = {}, {"up": 0, "down": 0, "shared": 0}
    params = wire.encode_params("j", "w0", 1, 1, 2, bytes(400), max_chunk=1 << 16)[0]
    msgs = [
        ("edgeps/j/up/w0", wire.encode_hello("j", "w0", 1, 1)),
        ("edgeps/j/up/w1", wire.encode_hello("j", "w1", 1, 1)),
        ("edgeps/j/down/w0", params),  # before done: training traffic
        ("edgeps/j/model", wire.encode_model("j", 1, "done", "m", 3, 100)),
        ("edgeps/j/host", wire.encode_model("j", 1, "done", "m", 3, 100)),
        ("edgeps/j/down/w0", params),  # the final model, then STOP
        ("edgeps/j/down/w1", wire.encode_stop("j", "w1", 1, 1, "done")),
    ]

    # Execute
    for topic, payload in msgs:
        sniff._on_message(None, None, SimpleNamespace(topic=topic, payload=payload))
    run = _run("asp", None)
    summary = {"accuracy": 0.915, "stop_reason": "target_accuracy", "updates": 9}
    _fill(run, summary, sniff)

    # Assert: after done, per sensor: the shared MODEL each, the down topics halved
    model, stop = len(msgs[3][1]), len(msgs[6][1])
    assert sniff.closing == {"up": 0, "down": len(params) + stop, "shared": model}
    assert run.closing_up == 0.0
    assert run.closing_down == pytest.approx((len(params) + stop) / 2 + model)
