"""`edgeps bench fw-kernels`: runs end to end under MicroPython, table and JSON."""

from __future__ import annotations

import json

import pytest
from edgeps.cli import main
from edgeps.lab.bench.fw_kernels import BATCHES, MODELS


@pytest.mark.firmware
def test_bench_fw_kernels_json_has_every_model_and_batch(
    micropython: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute: one timed step per case keeps this quick; sizes are not asserted
    code = main(["bench", "fw-kernels", "--json", "--repeat", "1"])
    # Assert
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["errors"] == {}
    assert {(r["model"], r["batch"]) for r in out["rows"]} == {
        (m, b) for m in MODELS for b in BATCHES
    }
    for row in out["rows"]:
        assert row["mpy_ms"] > 0 and row["numpy_ms"] > 0
        assert 0 < row["mpy_min_ms"] <= row["mpy_ms"]
        assert row["alloc_bytes"] > 0 and row["kept_bytes"] > 0
        assert row["vs_numpy"] == pytest.approx(
            row["mpy_ms"] / row["numpy_ms"], rel=0.05, abs=0.06
        )


@pytest.mark.firmware
def test_bench_fw_kernels_table(
    micropython: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute
    code = main(
        ["bench", "fw-kernels", "--repeat", "2", "--models", "mlp:8-4-3:tanh",
         "--batches", "5"]
    )  # fmt: skip
    # Assert
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[1].split() == [
        "model", "batch", "mpy", "ms", "min", "ms", "alloc", "B", "kept", "B",
        "numpy", "ms", "mpy/np",
    ]  # fmt: skip
    row = lines[2].split()
    assert row[:2] == ["mlp:8-4-3:tanh", "5"]
    assert all(float(v.rstrip("x")) > 0 for v in row[2:])


@pytest.mark.parametrize(
    "argv",
    [["--repeat", "0"], ["--models", "cnn:3"], ["--batches", "0"], ["--batches", "a"]],
)
def test_bench_fw_kernels_rejects_bad_flags(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "fw-kernels", *argv])
    assert exc.value.code != 0


@pytest.mark.firmware
def test_bench_fw_kernels_reports_a_firmware_that_fails(
    micropython: str, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Prepare: a directory without edgeps_worker
    # Execute
    code = main(["bench", "fw-kernels", "--json", "--repeat", "1",
                 "--firmware", str(tmp_path)])  # fmt: skip
    # Assert
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["rows"] == []
    assert "ImportError" in out["errors"]["micropython"]


@pytest.mark.firmware
def test_bench_fw_kernels_has_codec_rows(
    micropython: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Execute
    code = main(["bench", "fw-kernels", "--json", "--repeat", "2", "--models",
                 "mlp:8-4-3,softmax:4x3", "--batches", "5"])  # fmt: skip
    # Assert: every codec for each model size, an encode and a decode time
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["errors"] == {}
    rows = out["codec_rows"]
    assert {(r["n_params"], r["codec"]) for r in rows} == {
        (n, c) for n in (51, 15) for c in ("f32", "f16", "i8", "i8-f32res")
    }
    for r in rows:  # f32 and f16 of 15 values may take under the 1 us tick
        assert r["encode_ms"] >= 0 and r["decode_ms"] >= 0 and r["numpy_encode_ms"] > 0
        assert r["encode_alloc_bytes"] >= 0 and r["decode_alloc_bytes"] >= 0
        if r["codec"] == "i8":
            assert r["encode_ms"] > 0 and r["decode_ms"] > 0
