"""tools/paper_join.py: slices of `bench paper --json` join into one table."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from types import ModuleType
from typing import Any

from edgeps.lab.bench.paper_table import PaperRun

from tests.conftest import REPO


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "paper_join", REPO / "tools" / "paper_join.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["paper_join"] = module
    spec.loader.exec_module(module)
    return module


def _doc(policies: list[str], runs: list[PaperRun]) -> dict[str, Any]:
    config = {"policies": policies, "targets": [0.8, 0.9], "stop": 0.9,
              "max_time": None}  # fmt: skip
    body = {"step_s": None, "step_from": "off", "lr": 0.01, "max_time": 120.0,
            "targets": [0.8, 0.9], "stop": 0.9,
            "runs": [dataclasses.asdict(r) for r in runs]}  # fmt: skip
    return {"config": config, "results": {"32": body}, "wall_seconds": 100.0}


def test_two_slices_make_one_table_in_the_files_order() -> None:
    # Arrange: bsp in one command, asp in another, each as the bench wrote it
    bsp = PaperRun("bsp", 0, times={"0.8": 50.0, "0.9": None}, curve=[(1.0, 0.5)])
    asp = PaperRun("asp", 0, times={"0.8": 40.0, "0.9": 90.0})

    # Execute
    config, results = _load().join([_doc(["bsp"], [bsp]), _doc(["asp"], [asp])])

    # Assert: rows from both files, runs rebuilt with their curves
    assert config["policies"] == ["bsp", "asp"]
    rows = results["32"]["rows"]
    assert [r.policy for r in rows] == ["bsp", "asp"]
    assert rows[1].times == {"0.8": 40.0, "0.9": 90.0}
    assert results["32"]["runs"][0].curve == [(1.0, 0.5)]
    assert results["32"]["lr"] == 0.01 and results["32"]["stop"] == 0.9
