"""Each export against numpy: ONNX under onnxruntime, the C header under gcc, JSON."""

from __future__ import annotations

import builtins
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from edgeps.model import json_export
from edgeps.model.c_export import scratch_length
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.scaler import Scaler
from edgeps.model.writers import WRITERS, export

NATIVE = Path(__file__).resolve().parents[2] / "native"
SPECS = ["linear:5", "logistic:5", "softmax:5x3", "mlp:5-20-4", "mlp:5-8-6-3:tanh"]


def _model(text: str, *, scaled: bool = True, seed: int = 0) -> TrainedModel:
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(seed)
    params = (rng.normal(size=spec.n_params) * 0.7).astype(np.float32)
    n_out = (
        1
        if spec.kind == "linear"
        else (2 if spec.kind == "logistic" else spec.n_classes)
    )
    classes = None if spec.kind == "linear" else tuple(f"c{i}" for i in range(n_out))
    scaler = Scaler.fit(_raw(100, seed + 1)) if scaled else None
    return TrainedModel(ModelCard(spec, classes, scaler), params)


def _raw(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(loc=[10, -5, 300, 0, 1], scale=[2, 1, 50, 1, 0.1], size=(n, 5))


def _reference(model: TrainedModel, X: np.ndarray) -> np.ndarray:
    """Scores from the numpy kernels on the scaled rows."""
    return np.asarray(
        get_backend("numpy").forward(model.spec, model.params, model.prepare(X))
    )


@pytest.mark.parametrize("text", SPECS)
def test_onnx_export_matches_numpy(tmp_path: Path, text: str) -> None:
    # Prepare
    ort = pytest.importorskip("onnxruntime")
    model = _model(text)
    X = _raw(64, 9).astype(np.float32)
    path = tmp_path / "m.onnx"
    # Execute
    export(model, "onnx", path, {"job": "t"})
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]
    got = session.run(None, {"x": X})
    # Assert
    np.testing.assert_allclose(got[0], _reference(model, X), rtol=1e-4, atol=1e-5)
    if model.spec.kind != "linear":
        assert outputs == ["scores", "label"]
        np.testing.assert_array_equal(got[1], model.predict(X))


def test_onnx_model_reads_its_card_back(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from edgeps.model.onnx_export import OnnxModel

    model = _model("mlp:5-20-4")
    export(model, "onnx", tmp_path / "m.onnx", {"accuracy": 0.5})
    back = OnnxModel(tmp_path / "m.onnx")
    assert back.card.classes == model.card.classes and back.meta == {"accuracy": 0.5}
    X = _raw(10, 3)
    np.testing.assert_array_equal(back.predict(X), model.predict(X))


def test_missing_onnx_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_import = builtins.__import__

    def no_onnx(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "onnx" or name.startswith("onnx."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_onnx)
    with pytest.raises(ValueError, match=r"pip install 'edgeps\[export\]'"):
        export(_model("logistic:5"), "onnx", tmp_path / "m.onnx")


@pytest.mark.parametrize("text", SPECS)
def test_json_export_round_trips_exactly(tmp_path: Path, text: str) -> None:
    model = _model(text)
    export(model, "json", tmp_path / "m.json", {"version": 3})
    back, meta = json_export.read(tmp_path / "m.json")
    np.testing.assert_array_equal(back.params, model.params)
    assert back.card.to_dict() == model.card.to_dict() and meta == {"version": 3}


DRIVER = r"""
#include <stdio.h>
#include "{name}.h"
{rows}
int main(void) {{
    float scaled[{P}_N_FEATURES], out[{P}_N_OUTPUTS], scratch[{P}_SCRATCH_LENGTH];
    if ({p}_check({P}_SCRATCH_LENGTH) != EpsOk) return 1;
    for (int r = 0; r < N_ROWS; r++) {{
        int32_t cls = {p}_predict(rows[r], scaled, out, scratch);
        printf("%d", (int)cls);
        for (int c = 0; c < {P}_N_OUTPUTS; c++) printf(" %.9g", out[c]);
        printf("\n");
    }}
    {name_check}
    return 0;
}}
"""


def _compile_and_run(tmp_path: Path, model: TrainedModel, X: np.ndarray) -> str:
    cc = shutil.which("gcc")
    if cc is None:
        pytest.fail("gcc is needed to compile the C export")
    export(model, "c", tmp_path / "net_model.h", {"job": "t"})
    rows = (
        "#define N_ROWS {}\nstatic const float rows[N_ROWS][{}] = {{\n{}\n}};".format(
            len(X),
            X.shape[1],
            ",\n".join("{" + ", ".join(f"{v:.9g}f" for v in r) + "}" for r in X),
        )
    )
    name_check = (
        'printf("%s\\n", net_model_class_name(0));'
        if model.spec.kind != "linear"
        else ""
    )
    src = tmp_path / "main.c"
    src.write_text(
        DRIVER.format(name="net_model", P="NET_MODEL", p="net_model", rows=rows,
                      name_check=name_check)
    )  # fmt: skip
    exe = tmp_path / "predict"
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-DEPS_PORTABLE",
             "-DEPS_NO_DISPATCH", "-DEPS_NO_BUILTIN_SQRT"]  # fmt: skip
    sources = [str(NATIVE / s) for s in ("eps.c", "eps_math.c", "eps_model.c")]
    res = subprocess.run(
        [cc, *flags, "-I", str(NATIVE), "-I", str(tmp_path), str(src), *sources,
         "-o", str(exe)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    return run.stdout


@pytest.mark.parametrize("text", SPECS)
def test_c_header_compiles_with_werror_and_matches_numpy(
    tmp_path: Path, text: str
) -> None:
    # Prepare
    model = _model(text)
    X = _raw(12, 5).astype(np.float32)
    # Execute
    lines = _compile_and_run(tmp_path, model, X).splitlines()
    # Assert
    got = np.array([[float(v) for v in ln.split()[1:]] for ln in lines[: len(X)]])
    classes = [int(ln.split()[0]) for ln in lines[: len(X)]]
    want = _reference(model, X).reshape(len(X), -1)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if model.spec.kind != "linear":
        assert classes == model.predict(X).tolist()
        assert lines[len(X)] == "c0"


def test_c_header_without_a_scaler(tmp_path: Path) -> None:
    model = _model("mlp:5-20-4", scaled=False)
    X = _raw(4, 6).astype(np.float32) / 100
    lines = _compile_and_run(tmp_path, model, X).splitlines()
    assert [int(ln.split()[0]) for ln in lines[:4]] == model.predict(X).tolist()


@pytest.mark.parametrize("text", SPECS)
def test_scratch_length_is_the_c_librarys(text: str) -> None:
    ffi_lib = pytest.importorskip("edgeps._native")
    spec = ModelSpec.parse(text)
    m = ffi_lib.ffi.new("EpsModel *")
    kinds = {"linear": 0, "logistic": 1, "softmax": 2, "mlp": 3}
    m.kind, m.n_features, m.n_classes = (
        kinds[spec.kind],
        spec.n_features,
        spec.n_classes,
    )
    m.n_hidden = len(spec.hidden)
    for i, h in enumerate(spec.hidden):
        m.hidden[i] = h
    m.activation = 1 if spec.activation == "tanh" else 0
    assert scratch_length(spec) == ffi_lib.lib.eps_model_scratch_length(m, 1)


def test_writers_are_registered_by_name() -> None:
    assert {"onnx", "c", "json"} <= set(WRITERS)
    with pytest.raises(ValueError, match="unknown export format"):
        export(_model("logistic:5"), "tflite", "m.tflite")


def test_c_header_builds_with_the_command_host_readme_gives(tmp_path: Path) -> None:
    # Prepare: the repository's native/ and a main/ holding the export and a
    # program that includes it, then the one gcc line of host/README.md
    readme = (NATIVE.parent / "host" / "README.md").read_text()
    found = re.search(r"`(gcc -DEPS_PORTABLE [^`]+)`", readme)
    assert found, "host/README.md gives no gcc command for the C header"
    shutil.copytree(NATIVE, tmp_path / "native")
    (tmp_path / "main").mkdir()
    model = _model("mlp:5-20-4")
    X = _raw(6, 5).astype(np.float32)
    export(model, "c", tmp_path / "main" / "job_model.h", {"job": "t"})
    rows = "#define N_ROWS {}\nstatic const float rows[N_ROWS][5] = {{\n{}\n}};".format(
        len(X), ",\n".join("{" + ", ".join(f"{v:.9g}f" for v in r) + "}" for r in X)
    )
    (tmp_path / "main" / "main.c").write_text(
        DRIVER.format(name="job_model", P="JOB_MODEL", p="job_model", rows=rows,
                      name_check="")
    )  # fmt: skip
    # Execute
    build = subprocess.run(
        shlex.split(found.group(1)),
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    run = subprocess.run(
        [str(tmp_path / "predict")], capture_output=True, text=True, timeout=30
    )
    # Assert
    assert run.returncode == 0, run.stderr
    classes = [int(line.split()[0]) for line in run.stdout.splitlines()]
    assert classes == model.predict(X).tolist()
