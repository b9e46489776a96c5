"""`edgeps bench predict`: one row per model and runtime, with time and memory."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main


@pytest.mark.firmware
def test_bench_predict_json_has_every_model_and_runtime(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Execute
    code = main(["bench", "predict", "--rows", "3", "--json"])
    # Assert
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    seen = {(r["model"], r["runtime"]) for r in rows}
    for model in ("logistic:30", "softmax:64x10", "mlp:64-32-10"):
        for runtime in ("c", "numpy", "onnxruntime", "micropython"):
            assert (model, runtime) in seen
    for r in rows:
        assert r["us_per_sample"] > 0 and r["memory_bytes"] > 0
