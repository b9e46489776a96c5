"""Builds of native/ other than the extension: microcontroller-style and single-ISA."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend

NATIVE = Path(__file__).resolve().parents[2] / "native"
COMMON_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"]
BUILDS = {
    # plain loops, own sqrt, no dispatch: what a microcontroller compiles
    "portable": ["-O2", "-DEPS_PORTABLE", "-DEPS_NO_DISPATCH", "-DEPS_NO_BUILTIN_SQRT"],
    # vector tiles without x86 dispatch: the code path of an ARM board
    "single-isa": [
        "-O3",
        "-DEPS_NO_DISPATCH",
        "-fno-math-errno",
        "-fno-trapping-math",
        "-ffp-contract=fast",
        "-Wno-psabi",
    ],
}
# what the library may need from the C runtime: memory copies only
ALLOWED_UNDEFINED = {"memcpy", "memset", "__stack_chk_fail"}


def _builder_module() -> Any:
    spec = importlib.util.spec_from_file_location("eps_build", NATIVE / "eps_build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module", params=sorted(BUILDS))
def portable(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Any, Any, list[Path]]:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler (cc/gcc) to build the library")
    flags = COMMON_FLAGS + BUILDS[request.param]
    out = tmp_path_factory.mktemp(request.param)
    build = _builder_module()
    objects = []
    for src in build.SOURCES:
        obj = out / (Path(src).stem + ".o")
        res = subprocess.run(
            [cc, *flags, "-fPIC", "-c", str(NATIVE / src), "-o", str(obj)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if res.returncode != 0:
            pytest.fail(f"{request.param} build of {src} failed:\n{res.stderr}")
        objects.append(obj)
    lib_path = out / "libeps.so"
    subprocess.run(
        [cc, "-shared", "-o", str(lib_path), *map(str, objects)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    from cffi import FFI

    ffi = FFI()
    ffi.cdef(build.CDEF)
    return ffi, ffi.dlopen(str(lib_path)), objects


def test_portable_objects_need_no_libm(portable: tuple[Any, Any, list[Path]]) -> None:
    # Prepare
    _, _, objects = portable
    nm = shutil.which("nm")
    if nm is None:
        pytest.fail("nm (binutils) is needed to inspect the objects")
    # Execute
    undefined = set()
    for obj in objects:
        res = subprocess.run(
            [nm, "-u", str(obj)], check=True, capture_output=True, text=True
        )
        undefined |= {line.split()[-1] for line in res.stdout.splitlines() if line}
    # Assert
    assert undefined <= ALLOWED_UNDEFINED, undefined - ALLOWED_UNDEFINED


@pytest.mark.parametrize(
    "text",
    ["linear:6", "logistic:9", "softmax:20x7", "mlp:20-17-5", "mlp:9-12-6-4:tanh"],
)
def test_portable_model_kernels_match_numpy(
    portable: tuple[Any, Any, list[Path]], text: str
) -> None:
    # Prepare
    ffi, lib, _ = portable
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(5)
    B = 45
    X = rng.standard_normal((B, spec.n_features)).astype(np.float32)
    if spec.kind == "linear":
        y = rng.standard_normal(B).astype(np.float32)
        labels, targets = ffi.NULL, ffi.from_buffer("float[]", y)
    else:
        n = 2 if spec.kind == "logistic" else spec.n_classes
        y = rng.integers(0, n, B).astype(np.int32)
        labels, targets = ffi.from_buffer("int32_t[]", y), ffi.NULL
    p = spec.init_params(5)
    m = ffi.new("EpsModel *")
    m.kind = ["linear", "logistic", "softmax", "mlp"].index(spec.kind)
    m.n_features, m.n_classes, m.n_hidden = spec.n_features, spec.n_classes, 0
    for i, h in enumerate(spec.hidden):
        m.hidden[i] = h
        m.n_hidden = i + 1
    m.activation = 1 if spec.activation == "tanh" else 0
    n_scratch = lib.eps_model_scratch_length(m, B)
    scratch = ffi.new("float[]", n_scratch)
    g = np.empty(spec.n_params, np.float32)
    loss = ffi.new("float *")
    assert lib.eps_model_check(m, spec.n_params, n_scratch, B) == lib.EpsOk
    # Execute
    status = lib.eps_model_loss_grad(
        m,
        ffi.from_buffer("float[]", p),
        ffi.from_buffer("float[]", X),
        B,
        labels,
        targets,
        ffi.from_buffer("float[]", g),
        scratch,
        loss,
    )
    # Assert
    assert status == lib.EpsOk
    want_loss, want_g = get_backend("numpy").loss_and_grad(spec, p, X, y)
    assert loss[0] == pytest.approx(want_loss, rel=2e-5)
    np.testing.assert_allclose(g, want_g, rtol=1e-4, atol=2e-6)


def test_portable_adam_and_norm_match_numpy(
    portable: tuple[Any, Any, list[Path]],
) -> None:
    # Prepare
    ffi, lib, _ = portable
    rng = np.random.default_rng(6)
    p = rng.standard_normal(300).astype(np.float32)
    g = rng.standard_normal(300).astype(np.float32)
    m, v = np.zeros(300, np.float32), np.zeros(300, np.float32)
    p_ref, m_ref, v_ref = p.copy(), m.copy(), v.copy()
    # Execute
    buf = [ffi.from_buffer("float[]", a) for a in (p, g, m, v)]
    lib.eps_adam_step(*buf, 300, 3, 0.01, 0.9, 0.999, 1e-8)
    get_backend("numpy").adam_step(p_ref, g, m_ref, v_ref, 3, 0.01)
    # Assert
    np.testing.assert_allclose(p, p_ref, rtol=1e-5, atol=1e-6)
    assert lib.eps_l2_norm(ffi.from_buffer("float[]", g), 300) == pytest.approx(
        float(np.linalg.norm(g)), rel=1e-5
    )


def test_cdef_declares_exactly_the_exported_functions(
    portable: tuple[Any, Any, list[Path]],
) -> None:
    # Prepare: the cdef is generated from the headers; the objects are the truth
    _, lib, objects = portable
    nm = shutil.which("nm")
    if nm is None:
        pytest.fail("nm (binutils) is needed to inspect the objects")
    # Execute
    exported = set()
    for obj in objects:
        res = subprocess.run(
            [nm, "-g", "--defined-only", str(obj)],
            check=True,
            capture_output=True,
            text=True,
        )
        exported |= {
            line.split()[-1] for line in res.stdout.splitlines() if " T " in line
        }
    declared = {name for name in dir(lib) if name.startswith("eps_")}
    # Assert
    assert declared == exported
