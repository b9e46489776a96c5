"""The C header of conv models: compiled with gcc and checked against numpy."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend
from edgeps.model.c_export_conv import net_scratch_length
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.scaler import Scaler
from edgeps.model.writers import export

NATIVE = Path(__file__).resolve().parents[2] / "native"
SPECS = [
    "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10",
    "conv1d:3x17-c4k5s2p2-a2-c2k3-m2s1-4",
    "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10",
    "conv2d:2x7x8-c3k3s2p1-m2-a2s1-d17-3",
]

DRIVER = r"""
#include <stdio.h>
#include "net_model.h"
#define N_ROWS {n}
static const float rows[N_ROWS][NET_MODEL_N_FEATURES] = {{
{rows}
}};
int main(void) {{
    static float scaled[NET_MODEL_N_FEATURES], out[NET_MODEL_N_OUTPUTS];
    static float scratch[NET_MODEL_SCRATCH_LENGTH];
    if (net_model_check(NET_MODEL_SCRATCH_LENGTH) != EpsOk) return 1;
    if (net_model_check(NET_MODEL_SCRATCH_LENGTH - 1) != EpsErrLength) return 2;
    for (int r = 0; r < N_ROWS; r++) {{
        int32_t cls = net_model_predict(rows[r], scaled, out, scratch);
        printf("%d", (int)cls);
        for (int c = 0; c < NET_MODEL_N_OUTPUTS; c++) printf(" %.9g", out[c]);
        printf("\n");
    }}
    printf("%s\n", net_model_class_name(1));
    return 0;
}}
"""


def _model(text: str, scaled: bool) -> TrainedModel:
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(3)
    params = spec.init_params(1) + rng.normal(scale=0.05, size=spec.n_params).astype(
        np.float32
    )
    classes = tuple(f"c{i}" for i in range(spec.n_classes))
    scaler = Scaler.fit(_raw(spec, 50, 8)) if scaled else None
    return TrainedModel(ModelCard(spec, classes, scaler), params)


def _raw(spec: ModelSpec, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(loc=3.0, scale=2.0, size=(n, spec.n_features)).astype(np.float32)


def _compile_and_run(tmp_path: Path, model: TrainedModel, X: np.ndarray) -> str:
    cc = shutil.which("gcc")
    if cc is None:
        pytest.fail("gcc is needed to compile the C export")
    export(model, "c", tmp_path / "net_model.h", {"job": "t"})
    rows = ",\n".join("{" + ", ".join(f"{v:.9g}f" for v in r) + "}" for r in X)
    src = tmp_path / "main.c"
    src.write_text(DRIVER.format(n=len(X), rows=rows))
    exe = tmp_path / "predict"
    flags = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-DEPS_PORTABLE",
             "-DEPS_NO_DISPATCH", "-DEPS_NO_BUILTIN_SQRT"]  # fmt: skip
    names = ("eps.c", "eps_math.c", "eps_model.c", "eps_conv.c")
    res = subprocess.run(
        [cc, *flags, "-I", str(NATIVE), "-I", str(tmp_path), str(src),
         *[str(NATIVE / s) for s in names], "-o", str(exe)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, (run.returncode, run.stderr)
    return run.stdout


@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("text", SPECS)
def test_conv_c_header_compiles_and_matches_numpy(
    tmp_path: Path, text: str, scaled: bool
) -> None:
    # Prepare
    model = _model(text, scaled)
    X = _raw(model.spec, 9, 5)
    # Execute
    lines = _compile_and_run(tmp_path, model, X).splitlines()
    # Assert
    got = np.array([[float(v) for v in ln.split()[1:]] for ln in lines[: len(X)]])
    classes = [int(ln.split()[0]) for ln in lines[: len(X)]]
    want = get_backend("numpy").forward(model.spec, model.params, model.prepare(X))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert classes == model.predict(X).tolist()
    assert lines[len(X)] == "c1"


@pytest.mark.parametrize("batch", [1, 3, 32, 100])
@pytest.mark.parametrize("text", SPECS)
def test_net_scratch_length_is_the_c_librarys(text: str, batch: int) -> None:
    native = pytest.importorskip("edgeps._native")
    from edgeps.kernels.c_backend import net_struct

    spec = ModelSpec.parse(text)
    want = native.lib.eps_net_scratch_length(net_struct(spec), batch)
    assert net_scratch_length(spec, batch) == want
