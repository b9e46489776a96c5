"""`edgeps bench privacy`: a row per (workers, sigma) with epsilon, and an off row."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main

pytest.importorskip("dp_accounting")

FAST = ["--workers", "4", "--noise", "0,1", "--max-time", "6"]


def test_the_table_has_an_off_row_and_one_per_noise(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "privacy", *FAST]) == 0
    out = capsys.readouterr().out
    lines = [line.split() for line in out.splitlines()[3:]]
    assert [(r[0], r[1], r[2]) for r in lines] == [
        ("4", "off", "-"),
        ("4", "central", "0"),
        ("4", "central", "1"),
    ]
    assert lines[1][3] == "inf" and float(lines[2][3]) > 0


def test_json_rows(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "privacy", *FAST, "--mode", "local", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    off, zero, one = data["rows"]
    assert off["epsilon"] is None and zero["epsilon"] is None  # inf is null
    assert one["dp"] == "local" and one["epsilon"] > one["epsilon_per_shard"] > 0
    assert off["updates"] > 0 and data["config"]["mode"] == "local"


def test_bad_lists_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "privacy", "--noise", "a,b"]) == 2
    assert "--noise" in capsys.readouterr().err
