"""The board reads the CSVs the host worker reads (a header, text labels),
predicts a CSV in inference mode, and names a missing data file: under the
real MicroPython binary, against CPython and the host's reader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from edgeps.cli import main as cli
from edgeps.model.table import read_csv
from edgeps_worker import datafile

from tests.conftest import FIRMWARE, REPO, run_micropython
from tests.helpers.infer_model import checkpoint, train

pytestmark = [pytest.mark.firmware]
SCRIPT = str(REPO / "tests" / "helpers" / "mpy" / "fw_csv.py")

FILES = {
    "header_text.csv": b"x0,x1,animal\n1,2,cat\n3,4,dog\n5,6,cat\n",
    "header_ids.csv": b"# data\nx0,x1,label\n1,2,0\n3,4,1\n",
    "label_only_header.csv": b"1,2,label\n3,4,1\n5,6,0\n",
    "once.csv": b"1,2,cat\n3,4,dog\n",
    "mixed.csv": b"1,2,0\n3,4,cat\n",
    "quoted.csv": b'\xef\xbb\xbf"x0", "x1","y"\n"1","2","a"\n3,4,b\n',
    "target.csv": b"a,b,t\n1,2,0.5\n3,4,1.5\n",
    "bad_cell.csv": b"1,2,0\n3,x,1\n",
    "infer.csv": b"x0,x1\n1,2\n\n3,4\n# c\n5,6\n",
}


def write_files(d: Path) -> None:
    for name, data in FILES.items():
        (d / name).write_bytes(data)


def test_board_csv_rules_match_on_micropython_cpython_and_the_host(
    micropython: str, tmp_path: Path
) -> None:
    # Prepare
    write_files(tmp_path)
    # Execute
    mp = run_micropython(micropython, SCRIPT, str(tmp_path))
    cp = subprocess.run(
        [sys.executable, SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=FIRMWARE,
    )
    # Assert: both Pythons print the same, and what the host's reader reads
    assert mp.returncode == 0, mp.stdout + mp.stderr
    assert cp.returncode == 0, cp.stderr
    assert mp.stdout == cp.stdout
    out = mp.stdout.splitlines()
    host = read_csv(tmp_path / "header_text.csv")
    assert host.classes == ("cat", "dog") and list(host.y) == [0, 1, 0]
    assert out[0] == "header_text.csv 3 3 [(1.0, 0), (3.0, 1), (5.0, 0)] ['cat', 'dog']"
    # the job's WELCOME names its classes: the board's ids follow them
    assert out[1].endswith("[(1.0, 1), (3.0, 0), (5.0, 1)] ['dog', 'cat', 'bird']")
    assert "labels cat are not among the job's classes dog, bird" in out[2]
    assert out[3] == "header_ids.csv 2 2 [(1.0, 0), (3.0, 1)] None"
    assert list(read_csv(tmp_path / "label_only_header.csv").y) == [1, 0]
    assert out[4] == "label_only_header.csv 2 2 [(3.0, 1), (5.0, 0)] None"
    assert "once.csv:1: the first row has numbers for features and the label" in out[5]
    assert "mixed.csv:2: label 'cat' is text where earlier rows have numbers" in out[6]
    assert out[7] == "quoted.csv 2 2 [(1.0, 1), (3.0, 0)] ['b', 'a']"
    assert out[8] == "target.csv 2 2 [(1.0, 0.5), (3.0, 1.5)] None"
    assert "bad_cell.csv:2: feature cell 'x' is not a number" in out[9]
    assert out[10] == f"missing.csv error data file not found: {tmp_path}/missing.csv"
    assert out[11] == "infer [(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)]"


def board_config(tmp_path: Path, **changes: object) -> Path:
    cfg = {
        "job": "inf",
        "worker_id": "b1",
        "model": "logistic:30",
        "broker_host": "",
        "model_file": str(tmp_path / "model.bin"),
    }
    cfg.update(changes)
    path = tmp_path / "board.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.mark.parametrize("mode", ["train", "infer"])
def test_a_missing_data_file_is_named(
    micropython: str, tmp_path: Path, mode: str
) -> None:
    # Prepare
    missing = tmp_path / "no-such-part.bin"
    if mode == "infer":
        model, _, _ = train("logistic:30", "breast_cancer", steps=20)
        ckpt = checkpoint(model, tmp_path / "job.npz")
        out = str(tmp_path / "model.bin")
        assert cli(["export", str(ckpt), "--format", "micropython", "--out", out]) == 0
    config = board_config(
        tmp_path, mode=mode, data=str(missing), broker_host="127.0.0.1"
    )
    # Execute
    run = run_micropython(micropython, str(FIRMWARE / "main.py"), str(config))
    # Assert
    assert run.returncode == 2, run.stdout + run.stderr
    assert f"data file not found: {missing}" in run.stdout
    assert "Traceback" not in run.stdout + run.stderr


def test_infer_mode_predicts_the_rows_of_a_csv_as_of_its_epsd_file(
    micropython: str, tmp_path: Path
) -> None:
    # Prepare: the same rows as EPSD and as a CSV with a header and a label
    model, X, y = train("logistic:30", "breast_cancer", steps=50)
    ckpt = checkpoint(model, tmp_path / "job.npz")
    out = str(tmp_path / "model.bin")
    assert cli(["export", str(ckpt), "--format", "micropython", "--out", out]) == 0
    rows = X[:12]
    datafile.write_file(str(tmp_path / "rows.bin"), rows.tolist(), [0] * len(rows))
    head = ",".join(f"f{i}" for i in range(30)) + ",label\n"
    body = "".join(
        ",".join(repr(float(v)) for v in r) + f",{int(k)}\n"
        for r, k in zip(rows, y[:12], strict=True)
    )
    (tmp_path / "rows.csv").write_text(head + body)
    preds = {}
    for name in ("rows.bin", "rows.csv"):
        config = board_config(tmp_path, mode="infer", data=str(tmp_path / name))
        # Execute
        run = run_micropython(micropython, str(FIRMWARE / "main.py"), str(config))
        assert run.returncode == 0, run.stdout + run.stderr
        preds[name] = [
            json.loads(line.split(" ", 2)[2])
            for line in run.stdout.splitlines()
            if line.startswith("pred ")
        ]
    # Assert
    assert len(preds["rows.csv"]) == len(rows)
    assert preds["rows.csv"] == preds["rows.bin"]
    assert np.isfinite([p["value"] for p in preds["rows.csv"]]).all()


def test_a_built_board_renumbers_text_labels_to_the_welcome_classes(
    tmp_path: Path,
) -> None:
    # Prepare: a training board on a CSV of text labels, then its job's WELCOME
    from edgeps_worker import builder, wire, wire_card, worker_link

    (tmp_path / "d.csv").write_text("a,b,kind\n1,2,cat\n3,4,dog\n5,6,cat\n")
    config = board_config(
        tmp_path,
        model="softmax:2x3",
        data=str(tmp_path / "d.csv"),
        broker_host="127.0.0.1",
        verbose=False,
    )
    w = builder.build(str(config))
    raw = wire_card.encode_welcome(
        "inf", "b1", 1, 2, 3, w.trainer.n_params, "softmax:2x3",
        classes=("dog", "bird", "cat"),
    )  # fmt: skip
    # Execute
    worker_link._card(w, wire.decode(raw))
    w.trainer.step()
    # Assert: cat is the job's class 2, dog its class 0
    ring = w.trainer.source
    assert sorted(zip(ring.X[0:6:2], ring.y[:3], strict=True)) == [
        (1.0, 2), (3.0, 0), (5.0, 2)
    ]  # fmt: skip
    assert getattr(w, "stop_reason", None) != "model_mismatch"
