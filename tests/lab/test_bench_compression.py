"""`edgeps bench compression --quick`: a real mosquitto, serve, shaped sensors."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.bench.compression import _median

from tests.conftest import mosquitto_path


def test_median_counts_a_missed_target_as_slowest() -> None:
    assert _median([3.0, None, 1.0]) == 3.0
    assert _median([None, None, 1.0]) is None
    assert _median([2.0]) == 2.0


@pytest.mark.integration
@pytest.mark.skipif(mosquitto_path() is None, reason="mosquitto not installed")
def test_quick_bench_measures_int8_against_f32(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Execute
    code = main(["bench", "compression", "--quick", "--json"])

    # Assert: both rows trained to the target over the shaped links; the int8
    # UPDATE is about a quarter of the f32 one, PARAMS (f32 both) are the same
    out = json.loads(capsys.readouterr().out)
    rows = {r["compress"]: r for r in out["rows"]}
    assert code == 0 and set(rows) == {"f32", "int8"}
    f32, int8 = rows["f32"], rows["int8"]
    assert f32["time_to_target"] is not None and int8["time_to_target"] is not None
    assert int8["final_accuracy"] >= 0.9 and f32["final_accuracy"] >= 0.9
    assert 0.2 < int8["update_vs_f32"] < 0.3
    assert int8["params_bytes"] == f32["params_bytes"]
    assert all(r["runs"][0]["rejected"] == 0 for r in rows.values())
