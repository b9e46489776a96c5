"""The model's architecture in the serve summary (text and JSON) and metrics records."""

from __future__ import annotations

import json

from edgeps.model import architecture
from edgeps.runtime.reports import model_info
from edgeps.runtime.summary import Summary, summary_json, summary_table

CONV1D = "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10"


def _summary(model: dict) -> Summary:
    return Summary("ssp", "target", 3.0, 40, 0.93, 40, 13.3, 2, model=model)


def test_summary_table_and_json_carry_the_architecture() -> None:
    info = model_info(CONV1D)
    text = summary_table(_summary(info))
    line = [ln for ln in text.splitlines() if ln.startswith("model ")]
    assert line == [
        f"model {CONV1D}: conv 16x40 -> maxpool 16x20 -> conv 16x20 -> maxpool "
        f"16x10 -> conv 16x10 -> maxpool 16x5 -> dense 10; 3,498 params, "
        f"{info['macs']:,} MACs/sample"
    ]
    data = json.loads(summary_json(_summary(info)))
    assert data["model"]["architecture"] == info["architecture"]
    assert data["model"]["params"] == 3498 and data["model"]["in_shape"] == [1, 40]


def test_a_dense_model_has_its_line_and_a_bad_spec_none() -> None:
    assert "model mlp:4-8-3: dense 8 -> dense 3; 67 params" in summary_table(
        _summary(model_info("mlp:4-8-3"))
    )
    assert model_info("conv1d:1x4-c2k9-3") == {}  # kernel wider than the window
    assert "model " not in summary_table(_summary({}))


def test_describe_is_a_copy_each_time() -> None:
    a = architecture.describe(CONV1D)
    a["params"] = 0
    assert architecture.describe(CONV1D)["params"] == 3498
