"""`edgeps bench policies` scale rows: staleness grows with the number of workers."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.matrix.scale_rows import scale_rows, sizes


def test_asp_staleness_grows_with_the_number_of_workers() -> None:
    # Execute: the same scenario at 2 and 24 workers, 3 virtual seconds
    rows = scale_rows(["asp"], [2, 24], "homogeneous", 1, 3.0)

    # Assert: with N workers a push lands after about N - 1 others
    small, large = rows
    assert (small["workers"], large["workers"]) == (2, 24)
    assert large["max_staleness"] > 4 * max(1, small["max_staleness"])
    assert all(r["events_per_run"] > 0 and r["wall_s_per_run"] > 0 for r in rows)


def test_bench_policies_prints_its_scale_rows_in_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["bench", "policies", "--scenarios", "homogeneous", "--policies",
            "asp,bsp", "--seeds", "1", "--scale-sizes", "3,5",
            "--scale-max-time", "2", "--json"]  # fmt: skip

    assert main(argv) == 0

    out = json.loads(capsys.readouterr().out)
    got = [(r["workers"], r["policy"]) for r in out["scale"]]
    assert got == [(3, "asp"), (3, "bsp"), (5, "asp"), (5, "bsp")]


def test_scale_sizes_are_positive_and_may_be_none() -> None:
    assert sizes("") == []
    assert sizes("64,512") == [64, 512]
    with pytest.raises(ValueError):
        sizes("0")
