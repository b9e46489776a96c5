"""`edgeps bench conv`: runs end to end, table and JSON, says when torch is missing."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.bench import conv

QUICK = ["--repeat", "1", "--warmup", "0", "--batch", "1", "--clock", "cpu"]


def test_bench_conv_json_has_steps_for_every_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Execute: one sample per case; timings are not asserted
    code = main(["bench", "conv", "--json", "--only", "steps", *QUICK])
    # Assert
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    cases = {(r["model"], r["case"], r["batch"]) for r in out["rows"]}
    for name, _ in conv.MODELS:
        assert (name, "train step", 1) in cases and (name, "forward", 1) in cases
    for row in out["rows"]:
        assert row["numpy_us"] > 0 and row["c_us"] > 0
        assert row["vs_numpy"] == pytest.approx(row["numpy_us"] / row["c_us"])
        assert (row["torch_us"] is None) == (out["torch"] is None)


def test_bench_conv_table_has_a_row_per_layer(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conv, "MODELS", conv.MODELS[:1])
    monkeypatch.setattr(conv, "_torch", lambda: None)
    assert main(["bench", "conv", "--only", "layers", *QUICK]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == conv.NO_TORCH
    assert "L1 c16k5p2 fwd+bwd" in out and "L7 10 fwd" in out
    assert "train step" not in out


def test_bench_conv_rejects_a_bad_batch(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "conv", "--batch", "0"])
    assert "must be >= 1" in capsys.readouterr().err
