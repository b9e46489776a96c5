"""`edgeps bench core` times the core as serve runs it, norm guard on or off."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.bench.core import time_policy


@pytest.mark.parametrize("k", ["0", "10"])
def test_bench_core_reports_its_norm_guard(
    k: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "core", "--policy", "asp", "--workers", "2", "--params", "64",
            "--pushes", "40", "--repeat", "1", "--norm-guard", k, "--json"]  # fmt: skip

    assert main(argv) == 0

    out = json.loads(capsys.readouterr().out)
    assert out["norm_guard"] == float(k)
    assert [r["policy"] for r in out["rows"]] == ["asp"]
    assert out["rows"][0]["pushes_per_s"] > 0


def test_identical_pushes_pass_the_guard_so_no_run_deadlocks() -> None:
    # every push has the same norm: the guard must never refuse one
    assert time_policy("bsp", 4, 32, 200, norm_guard=10.0) > 0
