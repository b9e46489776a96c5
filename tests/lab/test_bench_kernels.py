"""`edgeps bench kernels`: runs end to end, table and JSON, rejects bad flags."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main


def test_bench_kernels_json_has_every_case(capsys: pytest.CaptureFixture[str]) -> None:
    # Execute: one sample per case keeps this quick; timings are not asserted
    code = main(["bench", "kernels", "--json", "--repeat", "1", "--warmup", "1"])
    # Assert
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    cases = {(r["case"], r["size"]) for r in out["rows"]}
    for model in ("logistic:32", "softmax:64x10", "mlp:64-32-10"):
        assert (model, "B=32") in cases and (model, "B=1024") in cases
    for op in ("sgd_step", "adam_step", "fp16_quantize+ef", "int8_dequantize"):
        assert (op, "n=2410") in cases
    for row in out["rows"]:
        assert row["numpy_us"] > 0 and row["c_us"] > 0
        assert row["speedup"] == pytest.approx(row["numpy_us"] / row["c_us"])


def test_bench_kernels_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "kernels", "--only", "vectors", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "speedup" in out and "int8_quantize+ef" in out


def test_bench_kernels_rejects_bad_repeat(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "kernels", "--repeat", "0"])
    assert "must be >= 1" in capsys.readouterr().err
