"""`edgeps bench policies --matrix --conv`: the conv preset's cells and jobs."""

from __future__ import annotations

import argparse
import json

import pytest
from edgeps.cli import main
from edgeps.lab.matrix import conv, grid
from edgeps.lab.matrix.cli import _preset
from edgeps.lab.matrix.grid import Cell, CellResult, Entry
from edgeps.lab.matrix.readings import counts_table, reading_counts
from edgeps.sim.simulator import Simulator


def test_the_conv_preset_builds_every_cell_with_its_job() -> None:
    pre = _preset(argparse.Namespace(conv=True))
    assert pre["datasets"] == ("mnist1d", "basicmotions", "mnist")
    cells = grid.cells(pre["datasets"], pre["sizes"], pre["scenarios"], (False,))
    assert len(cells) == 3 * 3 * 4
    assert {c.scenario for c in cells} == {"disturbed", "stragglers", "churn", "mixed"}
    for c in cells:
        cfg = grid.config(c, "dsp", 0, None)
        job = conv.JOBS[c.dataset]
        assert cfg.dataset == c.dataset and cfg.n_workers == c.workers
        assert cfg.target_accuracy == job.target and cfg.optimizer == job.optimizer
        assert cfg.max_time == pytest.approx(job.max_time_at(c.workers))
        assert cfg.max_time <= job.max_time and not cfg.balance
    # an explicit --max-time wins over the dataset's own
    assert grid.config(cells[0], "asp", 0, 5.0).max_time == 5.0


def test_conv_runs_are_shorter_with_more_workers() -> None:
    job = conv.JOBS["mnist"]
    times = [job.max_time_at(n) for n in (4, 8, 32, 64)]
    assert times[0] == times[1] == job.max_time
    assert times[1] > times[2] > times[3] > 0


@pytest.mark.parametrize(
    "name",
    ["mnist1d", "basicmotions", pytest.param("mnist", marks=pytest.mark.slow)],
)
def test_each_conv_dataset_gets_its_default_conv_model(name: str) -> None:
    sim = Simulator(grid.config(grid.Cell(name, 2, "stragglers", False), "asp", 0, 1.0))
    assert sim.spec.macs > sim.spec.n_params  # a conv model reuses its weights


def test_without_conv_the_tabular_defaults_stay() -> None:
    pre = _preset(argparse.Namespace(conv=False))
    assert pre["datasets"] == tuple(grid.DATASETS) and pre["balance"] == "both"
    cfg = grid.config(grid.Cell("sensors", 4, "mixed", False), "dsp", 0, None)
    assert cfg.max_time == grid.MAX_TIME and cfg.optimizer == "sgd"


def test_a_tiny_conv_matrix_runs(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["bench", "policies", "--matrix", "--conv", "--datasets", "basicmotions"]
    argv += ["--sizes", "2", "--scenarios", "stragglers", "--seeds", "1"]
    argv += ["--max-time", "4", "--policies", "asp,dsp", "--jobs", "1", "--json"]
    rc = main(argv)
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert data["config"]["datasets"]["basicmotions"]["optimizer"] == "adam"
    (cell,) = data["cells"]
    assert (cell["dataset"], cell["workers"], cell["balance"]) == (
        "basicmotions",
        2,
        False,
    )
    assert [p["policy"] for p in cell["policies"]] == ["asp", "dsp"]


def _cell(times: dict[str, float | None], accs: dict[str, float]) -> CellResult:
    r = CellResult(Cell("mnist", 8, "mixed", False))
    for p, t in times.items():
        r.entries[p] = Entry(p, [t], [accs.get(p, 0.9)], [0])
    return r


def test_each_dsp_reading_is_counted_against_the_rows_that_are_not_dsp() -> None:
    results = [
        # dsp:damp=1 strictly fastest; dsp 4% behind asp; nobody counts dsp
        # rows against each other
        _cell({"asp": 10.0, "bsp": 20.0, "dsp": 10.4, "dsp:damp=1": 8.0}, {}),
        # dsp 10% behind and 1 point less accurate; damp level with asp
        _cell(
            {"asp": 10.0, "dsp": 11.0, "dsp:damp=1": 10.0},
            {"asp": 0.9, "dsp": 0.89},
        ),
        # nobody reached: counts for accuracy only
        _cell({"asp": None, "dsp": None, "dsp:damp=1": None}, {}),
        # only plain dsp reached: strictly fastest
        _cell({"asp": None, "dsp": 30.0, "dsp:damp=1": None}, {}),
    ]
    plain, damp = reading_counts(results)
    assert (plain.row, damp.row) == ("dsp", "dsp:damp=1")
    assert (plain.cells, plain.reached, plain.within, plain.fastest) == (4, 3, 2, 1)
    assert plain.accurate == 3 and plain.worst == pytest.approx(1.1)
    assert plain.worst_at == "mnist/8/mixed/bal-off"
    # the last cell is judged without other readings: damp and the rest missed
    assert (damp.reached, damp.within, damp.fastest, damp.accurate) == (2, 2, 1, 4)
    assert damp.worst == 1.0
    assert "dsp:damp=1" in counts_table([plain, damp])


def test_fedavg_rows_are_neither_peers_nor_readings() -> None:
    r = _cell({"asp": 10.0, "dsp": 9.0, "fedavg": 1.0, "dsp/h8": 1.0}, {})
    (plain,) = reading_counts([r])
    assert (plain.within, plain.fastest) == (1, 1)


def test_conv_datasets_keep_their_run_length_without_conv(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "policies", "--matrix", "--datasets", "basicmotions"]
    argv += ["--sizes", "2", "--scenarios", "stragglers", "--balance", "off"]
    argv += ["--seeds", "1", "--policies", "asp", "--jobs", "1", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["config"]["max_time"] is None  # each dataset's own
    (cell,) = data["cells"]
    assert cell["policies"][0]["final_accuracy"] > 0
