"""`edgeps bench fw-feedback`: the board trains with each codec under MicroPython."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.bench.fw_feedback import ROWS


@pytest.mark.firmware
def test_bench_fw_feedback_json_has_every_codec(
    micropython: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute: a short run; accuracies are measured, not asserted
    code = main(["bench", "fw-feedback", "--json", "--max-iterations", "30",
                 "--seeds", "1", "--model", "softmax:64x10"])  # fmt: skip
    # Assert
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    rows = {r["codec"]: r for r in out["rows"]}
    assert set(rows) == set(ROWS)
    for r in rows.values():
        assert 0.0 <= r["accuracy"] <= 1.0 and r["test_loss"] > 0
        assert r["vs_f32_points"] == pytest.approx(
            100 * (r["accuracy"] - rows["f32"]["accuracy"]), abs=0.02
        )
    # 30 steps from the same start: training moved every row past chance
    assert min(r["accuracy"] for r in rows.values()) > 0.3


def test_bench_fw_feedback_rejects_bad_flags() -> None:
    with pytest.raises(SystemExit):
        main(["bench", "fw-feedback", "--max-iterations", "0"])
