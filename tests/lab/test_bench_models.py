"""`edgeps bench models`: its goals and table, and one real `--quick` run."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.kernels import ModelSpec
from edgeps.lab.bench.models_board import board_step
from edgeps.lab.bench.models_broker import note_of
from edgeps.lab.bench.models_table import ModelRow, goals, table
from edgeps.runtime.model_forms import complete_model

from tests.conftest import mosquitto_path

CONV1D = "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10"


def _rows(**conv: object) -> list[ModelRow]:
    """MNIST-1D, BasicMotions and MNIST rows that meet every goal, unless changed."""
    rows = [
        ModelRow("mnist1d", "logistic", "softmax:40x10", 410, 800, 10, 0.32),
        ModelRow("mnist1d", "mlp", "mlp:40-32-10", 1642, 3200, 10, 0.65,
                 c_ms=0.05, numpy_ms=0.1, board_ms=10.0, sensors_accuracy=0.62),
        ModelRow("mnist1d", "conv", CONV1D, 3498, 87040, 10, 0.91, c_ms=1.0,
                 numpy_ms=5.0, board_ms=1000.0, sensors_accuracy=0.92),
        ModelRow("basicmotions", "mlp", "mlp:600-32-4", 19364, 38656, 30, 0.8),
        ModelRow("basicmotions", "conv", "conv1d:6x100-c16k5p2-m2-4", 3860, 9e5,
                 30, 0.95),
        ModelRow("mnist", "conv", "lenet5", 61706, 835000, 4, 0.96, c_ms=20.0,
                 numpy_ms=70.0),
    ]  # fmt: skip
    for key, value in conv.items():
        dataset, field = key.split("__")
        row = next(r for r in rows if r.dataset == dataset and r.model == "conv")
        setattr(row, field, value)
    return rows


def test_every_goal_met_is_said_met() -> None:
    # Execute
    checked = goals(_rows())

    # Assert: the MLP comparison is met too (0.62 across sensors)
    assert [g.met for g in checked] == [True] * len(checked)
    assert all("[met]" in g.line() for g in checked)


def test_a_missed_goal_says_by_how_much() -> None:
    # Prepare: the sensors' conv at 0.85, LeNet-5 at 0.94, BasicMotions' conv
    # under its MLP, MNIST's C step only 2x numpy, the board conv 25x per FLOP
    rows = _rows(
        mnist1d__sensors_accuracy=0.85,
        mnist__accuracy=0.94,
        basicmotions__accuracy=0.75,
        mnist__numpy_ms=40.0,
    )
    mlp = next(r for r in rows if r.dataset == "mnist1d" and r.model == "mlp")
    mlp.board_ms = 1.0  # 1 ms for 3,200 FLOPs: the conv 37x slower per FLOP

    # Execute
    lines = [g.line().strip() for g in goals(rows)]

    # Assert
    missed = "[MISSED] MNIST-1D conv across 8 sensors >= 0.9: 0.850 (short by 0.050)"
    assert missed in lines
    assert any("LeNet-5" in x and "short by 0.010" in x for x in lines)
    assert any("BasicMotions" in x and "(short by 0.050)" in x for x in lines)
    assert any("3x numpy" in x and "short by 1.5x on mnist" in x for x in lines)
    assert any("board conv1d" in x and "mnist1d 36.8x" in x and "3.7x on mnist1d" in x
               for x in lines)  # fmt: skip


def test_a_goal_nothing_measured_says_so() -> None:
    # Prepare: no sensors, no board, no MNIST
    rows = [r for r in _rows() if r.dataset != "mnist"]
    for r in rows:
        r.sensors_accuracy = r.board_ms = None
    rows[2].sensors_note = "failed: serve exited 2"

    # Execute
    sensors, _, lenet, _, _, board = goals(rows)

    # Assert
    assert sensors.met is None
    assert sensors.line().endswith("failed: serve exited 2")
    assert lenet.met is None and lenet.line().endswith(
        "[not measured] LeNet-5 on the MNIST subset >= 0.95 (held out): -"
    )
    assert board.met is None


def test_the_table_has_a_line_a_row_and_notes_for_what_was_not_measured() -> None:
    # Prepare: the MNIST row did not fit the board
    rows = _rows()
    rows[-1].board_note = "does not fit a 96K heap (peak 600K, batch 16)"
    rows[-1].board_peak = 600 * 1024

    # Execute
    lines = table(rows).splitlines()

    # Assert: header, six rows, the note, then the specs
    assert lines[0].split()[:3] == ["dataset", "model", "params"]
    conv = lines[3].split()
    assert conv[:6] == ["mnist1d", "conv", "3498", "87040", "10", "0.910"]
    assert conv[-4:] == ["5.0", "1000.0", "-", "0.920"]
    assert lines[6].split()[-3] == "-" and lines[6].split()[-2] == "600K[1]"
    assert lines[7] == "[1] mnist conv: does not fit a 96K heap (peak 600K, batch 16)"
    assert lines[8] == "specs:" and CONV1D in lines[11]


def test_a_broker_run_note_says_how_it_ended() -> None:
    ok = {
        "error": "",
        "elapsed": 41.2,
        "updates": 900,
        "stop_reason": "target_accuracy",
    }
    assert note_of(ok) == "target_accuracy after 41 s, 900 updates"
    assert note_of({"error": "serve exited 2"}) == "failed: serve exited 2"


@pytest.mark.firmware
def test_a_model_too_big_for_the_board_heap_says_so(micropython: str) -> None:
    # Execute: 784-64-10 holds 50,890 float parameters and as many gradients
    out = board_step("mlp:784-64-10", 16, 1)

    # Assert: refused in the board's heap, measured and timed in a big one
    assert out["ms"] > 0 and out["peak"] > 400_000
    assert out["note"].startswith("does not fit a 96K heap (peak ")
    assert out["note"].endswith("step timed in a 16M heap")


@pytest.mark.firmware
def test_a_small_model_steps_on_the_board(micropython: str) -> None:
    out = board_step("mlp:40-32-10", 16, 3)
    assert out["note"] == "" and out["ms"] > 0
    assert 10_000 < out["peak"] < 96 * 1024


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed")
def test_quick_run_fills_every_column(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mnist1d")
    # Execute: MNIST-1D only, its three rows also on the broker: a short job
    # of 2 sensors each is enough to fill the column (the accuracy's level is
    # the benchmark's business, not this test's)
    code = main(["bench", "models", "--quick", "--datasets", "mnist1d",
                 "--sensors-datasets", "mnist1d", "--sensors", "2",
                 "--max-time", "5", "--repeat", "1", "--json"])  # fmt: skip

    # Assert
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert [r["model"] for r in out["rows"]] == ["logistic", "mlp", "conv"]
    for r in out["rows"]:
        assert 0.0 <= r["accuracy"] <= 1.0 and r["epochs"] == 1
        assert r["numpy_ms"] > 0 and r["flops"] > 0
        assert isinstance(r["sensors_accuracy"], float), r["sensors_note"]
    conv = out["rows"][2]
    default = complete_model("conv1d", 40, 10, (1, 40))  # what the dataset picks
    assert conv["spec"] == default
    assert conv["params"] == ModelSpec.parse(default).n_params
    assert conv["board_ms"] is not None or conv["board_note"]
    assert {g["name"].split(" ")[0] for g in out["goals"]} >= {"MNIST-1D", "board"}
