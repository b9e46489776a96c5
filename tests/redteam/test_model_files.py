"""Bad model files: a clear one-line error naming the file, exit 2, never a traceback.

Observed before: a malformed ONNX file, a model.bin whose class-name count
runs past its end, a JSON model with ``"params": {}`` or ``"classes": 5``
gave Python tracebacks (InvalidProtobuf, IndexError, TypeError) from
``predict``, ``export`` and ``worker --infer``; one flipped byte in model.bin
or model.onnx, or a JSON model of NaNs, was accepted and predicted wrongly.
model.bin now ends in a CRC-32 and an ONNX export carries a SHA-256 digest;
non-finite parameters are refused everywhere.
"""

from __future__ import annotations

import contextlib
import json
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.model import mpy_export
from edgeps.model.card import TrainedModel
from edgeps.model.files import from_checkpoint, load_export
from edgeps.model.writers import export
from edgeps.runtime.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from edgeps_worker.predict import Model as BoardModel
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import run_micropython
from tests.model.test_exports import _model, _raw
from tests.redteam._held import held

SPEC = "mlp:5-8-3"
X = _raw(40, 3).astype(np.float32)


def good_model() -> TrainedModel:
    return _model(SPEC)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A good model in every kind of file the commands read."""
    d = tmp_path_factory.mktemp("good")
    model = good_model()
    out = {
        "bin": export(model, "micropython", d / "model.bin", {}),
        "json": export(model, "json", d / "model.json", {"job": "t"}),
        "npz": save_checkpoint(
            d / "model.npz",
            Checkpoint(model.params, 7, meta={**model.card.to_dict(), "job": "t"}),
        ),
    }
    with contextlib.suppress(ValueError):  # without the export extra: no ONNX
        out["onnx"] = export(model, "onnx", d / "model.onnx", {"job": "t"})
    return out


def load_any(path: Path) -> Any:
    """What `edgeps predict` loads (`export` reads the .npz the same way)."""
    if path.suffix == ".npz":
        ckpt = load_checkpoint(path)
        return from_checkpoint(ckpt.params, ckpt.meta, str(path))
    return load_export(path)[0]


def refused_or_correct(path: Path) -> None:
    """A clear ValueError naming the file, or the good model's exact predictions."""
    try:
        model = load_any(path)
    except (ValueError, FileNotFoundError) as exc:
        assert str(path) in str(exc) and "\n" not in str(exc), exc
        return
    expected = good_model().predict(X)
    np.testing.assert_array_equal(model.predict(X), expected)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edgeps", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def rows_file(tmp_path: Path) -> Path:
    path = tmp_path / "rows.csv"
    path.write_text("\n".join(",".join(f"{v:.4f}" for v in row) for row in X) + "\n")
    return path


def one_line_exit_2(
    done: subprocess.CompletedProcess[str], row: str, path: Path
) -> None:
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    seen = f"rc {done.returncode}, stderr {done.stderr[-600:]!r}"
    held(done.returncode == 2 and "Traceback" not in done.stderr, row, seen)
    held(len(lines) == 1 and str(path) in lines[0], f"{row}: one line", seen)


# ---- the observed files -------------------------------------------------------


def bad_files(files: dict[str, Path], d: Path) -> dict[str, Path]:
    good_bin = files["bin"].read_bytes()
    head = struct.pack("<4sBBHIHH", b"EPSM", 1, 0, len(SPEC), 75, 5, 200)
    as_json = json.loads(files["json"].read_text())
    made = {
        "names_past_end.bin": head + SPEC.encode() + b"\x02c0",
        "flipped.bin": good_bin[:40] + bytes([good_bin[40] ^ 1]) + good_bin[41:],
        "truncated.bin": good_bin[:-7],
        "params_empty.json": json.dumps({**as_json, "params": {}}),
        "classes_5.json": json.dumps({**as_json, "classes": 5}),
        "nan.json": json.dumps({**as_json, "params": [float("nan")] * 75}),
        "garbage.onnx": b"\x08\x07\x12\x03edg" + bytes(range(200)),
    }
    if "onnx" in files:
        good_onnx = files["onnx"].read_bytes()
        at = good_onnx.find(good_model().params[3:4].tobytes())
        made["flipped.onnx"] = (
            good_onnx[:at] + bytes([good_onnx[at] ^ 0x10]) + good_onnx[at + 1 :]
        )
    out = {}
    for name, data in made.items():
        path = d / name
        if isinstance(data, str):
            path.write_text(data)
        else:
            path.write_bytes(data)
        out[name] = path
    return out


def test_each_bad_file_is_refused_by_its_reader(
    files: dict[str, Path], tmp_path: Path
) -> None:
    for name, path in bad_files(files, tmp_path).items():
        with pytest.raises(ValueError) as info:
            load_any(path)
        held(str(path) in str(info.value), f"{name} refused, naming the file",
             info.value)  # fmt: skip


@pytest.mark.slow
def test_predict_refuses_each_bad_file_in_one_line(
    files: dict[str, Path], tmp_path: Path
) -> None:
    rows = rows_file(tmp_path)
    for name, path in bad_files(files, tmp_path).items():
        done = cli("predict", str(path), "--data", str(rows))
        one_line_exit_2(done, f"predict {name}", path)


@pytest.mark.slow
def test_worker_infer_refuses_each_bad_bin_in_one_line(
    files: dict[str, Path], tmp_path: Path
) -> None:
    rows = rows_file(tmp_path)
    for name, path in bad_files(files, tmp_path).items():
        if path.suffix != ".bin":
            continue
        done = cli("worker", "--infer", "--model-file", str(path), "--data", str(rows))
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        seen = f"rc {done.returncode}, stderr {done.stderr[-600:]!r}"
        held(done.returncode == 2 and "Traceback" not in done.stderr, name, seen)
        held(any(str(path) in ln for ln in lines), f"worker --infer {name}", seen)


@pytest.mark.slow
def test_export_refuses_a_damaged_or_foreign_checkpoint(
    files: dict[str, Path], tmp_path: Path
) -> None:
    nan = tmp_path / "nan.npz"
    model = good_model()
    save_checkpoint(
        nan,
        Checkpoint(np.full(75, np.nan, np.float32), 3, meta=model.card.to_dict()),
    )
    for path in (nan, files["json"], *bad_files(files, tmp_path).values()):
        done = cli("export", str(path), "--format", "json",
                   "--out", str(tmp_path / "out.json"))  # fmt: skip
        one_line_exit_2(done, f"export {path.name}", path)


def test_an_older_model_bin_without_a_checksum_is_still_read(
    files: dict[str, Path], tmp_path: Path
) -> None:
    # Prepare: the version 1 layout is version 2's without its last 4 bytes
    v2 = files["bin"].read_bytes()
    v1 = v2[:4] + b"\x01" + v2[5:-4]
    old = tmp_path / "old.bin"
    old.write_bytes(v1)
    # Execute / Assert: host and board both read it
    np.testing.assert_array_equal(
        mpy_export.read(old).predict(X), good_model().predict(X)
    )
    assert BoardModel(str(old)).n_features == 5


def test_the_board_reader_checks_the_checksum_and_names_the_file(
    files: dict[str, Path], tmp_path: Path
) -> None:
    for path in bad_files(files, tmp_path).values():
        if path.suffix != ".bin":
            continue
        with pytest.raises(ValueError, match=str(path)):
            BoardModel(str(path))
    BoardModel(str(files["bin"]))  # the good one loads


# ---- fuzz: truncations and byte flips of every file kind ----------------------

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("kind", ["bin", "onnx", "npz", "json"])
@FUZZ
@given(cut=st.floats(0.0, 1.0))
def test_a_truncated_file_is_refused_or_whole(
    files: dict[str, Path], tmp_path: Path, kind: str, cut: float
) -> None:
    if kind not in files:
        pytest.skip("the export extra is not installed")
    data = files[kind].read_bytes()
    path = tmp_path / f"cut.{kind}"
    path.write_bytes(data[: int(len(data) * cut)])
    refused_or_correct(path)


@pytest.mark.parametrize("kind", ["bin", "onnx", "npz"])
@FUZZ
@given(where=st.floats(0.0, 1.0, exclude_max=True), bit=st.integers(0, 7))
def test_a_flipped_bit_is_refused_or_harmless(
    files: dict[str, Path], tmp_path: Path, kind: str, where: float, bit: int
) -> None:
    if kind not in files:
        pytest.skip("the export extra is not installed")
    data = bytearray(files[kind].read_bytes())
    data[int(len(data) * where)] ^= 1 << bit
    path = tmp_path / f"flip.{kind}"
    path.write_bytes(bytes(data))
    refused_or_correct(path)


@FUZZ
@given(where=st.floats(0.0, 1.0, exclude_max=True), bit=st.integers(0, 7))
def test_the_board_reader_refuses_a_flipped_bit(
    files: dict[str, Path], tmp_path: Path, where: float, bit: int
) -> None:
    data = bytearray(files["bin"].read_bytes())
    data[int(len(data) * where)] ^= 1 << bit
    path = tmp_path / "flip.bin"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=str(path)):
        BoardModel(str(path))


@pytest.mark.parametrize("bit", [2, 7, 15, 23, 31])
def test_a_parameter_count_beyond_the_file_is_refused_before_it_is_read(
    files: dict[str, Path], tmp_path: Path, bit: int
) -> None:
    # Prepare: one bit flipped in the header's parameter count (bytes 8-11):
    # read as it says, it would allocate up to 8 GB before the checksum
    data = bytearray(files["bin"].read_bytes())
    (count,) = struct.unpack_from("<I", data, 8)
    struct.pack_into("<I", data, 8, count ^ (1 << bit))
    path = tmp_path / "count.bin"
    path.write_bytes(bytes(data))
    # Execute, Assert: refused by name
    with pytest.raises(ValueError, match=str(path)):
        BoardModel(str(path))


@pytest.mark.firmware
def test_the_real_board_refuses_a_damaged_model_and_reads_the_good_one(
    micropython: str, files: dict[str, Path], tmp_path: Path
) -> None:
    # Prepare: the good file and copies with one byte flipped in each part
    # (byte 11: the parameter count grows by 2**26, more than any heap)
    data = files["bin"].read_bytes()
    cases = {"good.bin": data}
    for at in (4, 11, 20, 40, len(data) // 2, len(data) - 30, len(data) - 2):
        flipped = bytearray(data)
        flipped[at] ^= 0x04
        cases[f"flip{at}.bin"] = bytes(flipped)
    for name, blob in cases.items():
        (tmp_path / name).write_bytes(blob)
    script = tmp_path / "load.py"
    script.write_text(
        "import sys\n"
        "from edgeps_worker.predict import Model\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        m = Model(p)\n"
        "        print('ok', p, m.predict([0.5] * m.n_features)[1])\n"
        "    except ValueError as e:\n"
        "        print('refused', e)\n"
    )
    # Execute: under the real MicroPython binary
    run = run_micropython(micropython, str(script), *(str(tmp_path / n) for n in cases))
    # Assert: the good one predicts; every damaged one is refused by name
    lines = run.stdout.splitlines()
    assert run.returncode == 0, run.stdout + run.stderr
    assert lines[0].startswith(f"ok {tmp_path / 'good.bin'} c"), lines
    for line, name in zip(lines[1:], list(cases)[1:], strict=True):
        held(line.startswith("refused") and name in line,
             f"the board refuses {name}", line)  # fmt: skip
