"""`edgeps bench policies --matrix`: the shape of a tiny matrix and its goal checks."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.matrix.grid import Cell, CellResult, Entry
from edgeps.lab.matrix.report import check_goals, table

TINY = [
    "bench",
    "policies",
    "--matrix",
    "--scenarios",
    "stragglers",
    "--datasets",
    "sensors",
    "--sizes",
    "4",
    "--seeds",
    "1",
    "--max-time",
    "3",
    "--policies",
    "bsp,asp,dsp",
]


def test_tiny_matrix_has_every_cell_and_policy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc = main([*TINY, "--json", "--jobs", "2"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    cells = data["cells"]
    assert [(c["scenario"], c["workers"], c["balance"]) for c in cells] == [
        ("stragglers", 4, False),
        ("stragglers", 4, True),
    ]
    for c in cells:
        assert [p["policy"] for p in c["policies"]] == ["bsp", "asp", "dsp"]
        for p in c["policies"]:
            assert p["seeds"] == 1 and 0.0 <= p["final_accuracy"] <= 1.0
        best = c["best"]
        reached = [p for p in c["policies"] if p["time_to_target"] is not None]
        if reached:
            fastest = min(p["time_to_target"] for p in reached)
            assert next(p for p in c["policies"] if p["policy"] == best)[
                "time_to_target"
            ] == pytest.approx(fastest)
    names = {g["goal"].split(",")[0].split(" (")[0] for g in data["goals"]}
    assert "balance: BSP off/on time" in names
    assert any(n.startswith("dsp: cells within") for n in names)


def test_tiny_matrix_table_marks_the_best(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([*TINY, "--jobs", "1", "--balance", "on"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "stragglers" in out and "bsp" in out and "dsp" in out
    row = next(line for line in out.splitlines() if line.startswith("sensors"))
    assert row.count("*") <= 1


def _result(cell: Cell, times: dict[str, float | None], acc: float = 0.9):
    r = CellResult(cell)
    for pol, t in times.items():
        r.entries[pol] = Entry(pol, [t], [acc], [0])
    return r


def test_goals_judge_balancing_and_dsp_from_the_numbers() -> None:
    off = Cell("sensors", 8, "stragglers", False)
    on = Cell("sensors", 8, "stragglers", True)
    results = [
        _result(off, {"bsp": 12.0, "asp": 4.0, "dsp": 3.9}),
        _result(on, {"bsp": 6.0, "asp": 4.4, "dsp": 3.0}),
    ]
    goals = {g["goal"].split(" (")[0].split(",")[0]: g for g in check_goals(results)}
    assert goals["balance: BSP off/on time"]["value"] == pytest.approx(2.0)
    assert goals["balance: worst on/off time"]["ok"] is False  # asp 10% slower
    assert goals["dsp: strictly fastest share of a scenario's cells"]["ok"] is True
    assert "4.4" in table(results, 30.0) and "*" in table(results, 30.0)


def test_unknown_dataset_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main([*TINY[:3], "--datasets", "nope", "--seeds", "1"])
    assert rc == 2
    assert "unknown dataset" in capsys.readouterr().err
