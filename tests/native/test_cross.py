"""native/ cross-compiled for the Raspberry Pi's ISAs, run under qemu-user.

tests/native/eps_driver.c runs each kernel on the inputs it reads from stdin;
here the library is built with the extension's own flags (no dispatch exists
on ARM, so this is the code a Pi runs) and its replies are compared with the
numpy reference. Skipped, with the reason, where a cross compiler or qemu is
missing; .ci/run installs both and sets EDGEPS_REQUIRE_CROSS=1, which turns
such a skip into a failure.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from edgeps.kernels import ModelSpec, get_backend

pytestmark = pytest.mark.cross

REPO = Path(__file__).resolve().parents[2]
NATIVE = REPO / "native"
DRIVER = Path(__file__).resolve().parent / "eps_driver.c"
NP = get_backend("numpy")
ULP = float(np.finfo(np.float32).eps)
F32, I32 = np.dtype("<f4"), np.dtype("<i4")
APT = (
    "apt-get install gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf qemu-user "
    "libc6-dev-arm64-cross libc6-dev-armhf-cross"
)


@dataclass(frozen=True)
class Target:
    name: str
    cc: str
    qemu: str
    flags: tuple[str, ...]
    isa: str  # the build info's isa= on this target
    objdump: str
    vector_float: str  # regex of a SIMD float multiply-add/add/multiply


TARGETS = [
    # Raspberry Pi 3/4/5 with a 64-bit OS: NEON is part of ARMv8-A
    Target(
        "aarch64",
        "aarch64-linux-gnu-gcc",
        "qemu-aarch64",
        (),
        "aarch64 neon",
        "aarch64-linux-gnu-objdump",
        r"\bf(mla|add|mul)\s+v\d+\.4s",
    ),
    # Debian armhf (ARMv7-A, VFPv3-D16): Pi 2/3/4 with a 32-bit Debian
    Target(
        "armhf",
        "arm-linux-gnueabihf-gcc",
        "qemu-arm",
        (),
        "armv7 vfp",
        "arm-linux-gnueabihf-objdump",
        r"\bv(mla|fma|add|mul)\.f32\s+q\d+",
    ),
    # Raspberry Pi OS 32-bit targets ARMv6 + VFPv2 (Pi 1, Zero): the same
    # toolchain restricted to that ISA (libc stays ARMv7, so qemu's default CPU)
    Target(
        "armv6hf",
        "arm-linux-gnueabihf-gcc",
        "qemu-arm",
        ("-march=armv6+fp", "-mfpu=vfp", "-marm"),
        "armv6 vfp",
        "arm-linux-gnueabihf-objdump",
        r"\bv(mla|fma|add|mul)\.f32\s+q\d+",
    ),
]


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("eps_build", NATIVE / "eps_build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def skip_unless_ci(why: str) -> None:
    """Skip with the reason, or fail where CI has installed the tools."""
    if os.environ.get("EDGEPS_REQUIRE_CROSS") == "1":
        pytest.fail(f"EDGEPS_REQUIRE_CROSS=1 but {why}")
    pytest.skip(why)


def _missing(target: Target) -> str | None:
    for tool in (target.cc, target.qemu):
        if shutil.which(tool) is None:
            return f"{tool} is not installed ({APT})"
    return None


@dataclass
class Driver:
    target: Target
    exe: Path

    def run(self, command: str, request: bytes = b"") -> bytes:
        res = subprocess.run(
            [self.target.qemu, str(self.exe), command],
            input=request,
            capture_output=True,
            timeout=120,
        )
        assert res.returncode == 0, res.stderr.decode(errors="replace")
        return res.stdout


@pytest.fixture(scope="module", params=TARGETS, ids=[t.name for t in TARGETS])
def driver(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Driver:
    target: Target = request.param
    why = _missing(target)
    if why is not None:
        skip_unless_ci(why)
    build = _builder()
    flags = [*build.compile_args(), *target.flags]
    exe = tmp_path_factory.mktemp(target.name) / "eps_driver"
    res = subprocess.run(
        [target.cc, *flags, "-Wextra", "-Werror", "-static", "-I", str(NATIVE)]
        + ['-DEPS_BUILD_FLAGS="' + " ".join(flags) + '"', str(DRIVER)]
        + [str(NATIVE / s) for s in build.SOURCES]
        + ["-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if res.returncode != 0:
        pytest.fail(f"{target.name} build failed:\n{res.stderr}")
    return Driver(target, exe)


class Reply:
    """Reads the driver's little-endian reply in order."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, dtype: np.dtype[Any] | type, n: int) -> np.ndarray:
        dt = np.dtype(dtype).newbyteorder("<")
        out = np.frombuffer(self.data, dt, n, self.pos)
        self.pos += n * dt.itemsize
        return out.copy()

    def done(self) -> bool:
        return self.pos == len(self.data)


def pack(*parts: Any) -> bytes:
    out = []
    for part in parts:
        if isinstance(part, np.ndarray):
            out.append(part.astype(part.dtype.newbyteorder("<")).tobytes())
        elif isinstance(part, float):
            out.append(np.array([part], F32).tobytes())
        else:
            out.append(np.array([part], I32).tobytes())
    return b"".join(out)


def test_build_info_on_target(driver: Driver) -> None:
    # Execute
    text = driver.run("info").decode().strip()
    info = dict(part.partition("=")[::2] for part in text.split(";"))
    # Assert: the extension's flags, and one build because of the target alone
    assert info["isa"] == driver.target.isa
    assert info["dispatch"] == "none" and info["running"] == "none"
    assert info["flags"].startswith("-O3 -std=c99")
    assert "-DEPS_NO_DISPATCH" not in info["flags"]


def test_simd_float_code_matches_the_documented_isa(driver: Driver) -> None:
    # Prepare: aarch64 vectorizes with NEON at -O3; 32-bit ARM stays on the VFP
    objdump = shutil.which(driver.target.objdump)
    if objdump is None:
        skip_unless_ci(f"{driver.target.objdump} is not installed (binutils)")
    # Execute
    res = subprocess.run(
        [objdump, "-d", str(driver.exe)], capture_output=True, text=True, timeout=120
    )
    n_simd = len(re.findall(driver.target.vector_float, res.stdout))
    # Assert
    assert res.returncode == 0
    if driver.target.name == "aarch64":
        assert n_simd > 100
    else:
        assert n_simd == 0


MODEL_SPECS = [
    "linear:6",
    "logistic:9",
    "softmax:20x7",
    "softmax:19x16",
    "mlp:20-17-5",
    "mlp:64-32-10",
    "mlp:9-12-6-4:tanh",
    "mlp:33-17-9-16:tanh",
    "mlp:8-24-8-8",
]


@pytest.mark.parametrize("text", MODEL_SPECS)
@pytest.mark.parametrize("batch", [1, 45])
def test_model_kernels_match_numpy(driver: Driver, text: str, batch: int) -> None:
    # Prepare
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(batch)
    X = rng.standard_normal((batch, spec.n_features)).astype(np.float32)
    if spec.kind == "linear":
        y = rng.standard_normal(batch).astype(np.float32)
    else:
        n = 2 if spec.kind == "logistic" else spec.n_classes
        y = rng.integers(0, n, batch).astype(np.int32)
    p = spec.init_params(batch) + np.float32(0.01)
    kind = ["linear", "logistic", "softmax", "mlp"].index(spec.kind)
    hidden = [*spec.hidden, 0, 0][:2]
    act = 1 if spec.activation == "tanh" else 0
    header = [kind, spec.n_features, spec.n_classes, len(spec.hidden), *hidden]
    request = pack(*header, act, batch, p, X, y)
    # Execute
    reply = Reply(driver.run("model", request))
    status = int(reply.take(I32, 1)[0])
    loss = float(reply.take(F32, 1)[0])
    grad = reply.take(F32, spec.n_params)
    out = reply.take(F32, batch * spec.n_classes)
    # Assert
    assert reply.done() and status == 0
    want_loss, want_grad = NP.loss_and_grad(spec, p, X, y)
    assert loss == pytest.approx(want_loss, rel=2e-5, abs=1e-6)
    tol = 2e-5 * max(1.0, float(np.abs(want_grad).max()))
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=tol)
    want_out = NP.forward(spec, p, X).reshape(-1)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)


NET_SPECS = [
    "conv1d:1x40-c16k5p2-m2-c16k5p2-m2-c16k5p2-m2-10",
    "conv1d:3x17-c4k5s2p2-a2-c2k3-m2s1-4",
    "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10",
    "conv2d:3x11x13-c5k4s3p2-m3s1-a2-d20-d17-5",
]
_NET_OPS = {"conv": 0, "maxpool": 1, "avgpool": 2, "dense": 3}


@pytest.mark.parametrize("text", NET_SPECS)
@pytest.mark.parametrize("batch", [1, 37])
def test_conv_net_kernels_match_numpy(driver: Driver, text: str, batch: int) -> None:
    # Prepare
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(batch)
    X = rng.standard_normal((batch, spec.n_features)).astype(np.float32)
    y = rng.integers(0, spec.n_classes, batch).astype(np.int32)
    p = spec.init_params(batch) + np.float32(0.01)
    header = [len(spec.in_shape) - 1, *[*spec.in_shape, 0][:3], len(spec.ops)]
    for op in spec.ops:
        ly = op.layer
        relu = int(ly.relu and ly.op in ("conv", "dense"))
        header += [_NET_OPS[ly.op], ly.n_out, ly.k, ly.stride, ly.pad, relu]
    request = pack(*header, batch, p, X, y)
    # Execute
    reply = Reply(driver.run("net", request))
    status = int(reply.take(I32, 1)[0])
    loss = float(reply.take(F32, 1)[0])
    grad = reply.take(F32, spec.n_params)
    out = reply.take(F32, batch * spec.n_classes)
    # Assert
    assert reply.done() and status == 0
    want_loss, want_grad = NP.loss_and_grad(spec, p, X, y)
    assert loss == pytest.approx(want_loss, rel=2e-5, abs=1e-6)
    tol = 2e-5 * max(1.0, float(np.abs(want_grad).max()))
    np.testing.assert_allclose(grad, want_grad, rtol=1e-4, atol=tol)
    want_out = NP.forward(spec, p, X).reshape(-1)
    np.testing.assert_allclose(out, want_out, rtol=1e-4, atol=1e-6)


def test_optimizer_steps_match_numpy(driver: Driver) -> None:
    # Prepare
    rng = np.random.default_rng(6)
    n, t, lr, mu, b1, b2, eps = 300, 3, 0.01, 0.9, 0.9, 0.999, 1e-8
    p, g, vel = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    m = rng.standard_normal(n).astype(np.float32) * np.float32(0.1)
    v = np.abs(rng.standard_normal(n)).astype(np.float32) * np.float32(0.01)
    request = pack(n, t, lr, mu, b1, b2, eps, p, g, vel, m, v)
    # Execute
    reply = Reply(driver.run("optim", request))
    got = [reply.take(F32, n) for _ in range(6)]
    # Assert
    assert reply.done()
    p_sgd, p_mom, p_adam = p.copy(), p.copy(), p.copy()
    vel_mom, m_adam, v_adam = vel.copy(), m.copy(), v.copy()
    NP.sgd_step(p_sgd, g, lr)
    NP.momentum_step(p_mom, g, vel_mom, lr, mu)
    NP.adam_step(p_adam, g, m_adam, v_adam, t, lr, b1, b2, eps)
    want = [p_sgd, p_mom, vel_mom, p_adam, m_adam, v_adam]
    names = ("sgd", "mom", "vel", "adam", "m", "v")
    for name, a, b in zip(names, got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("block", [1, 7, 64])
def test_update_helpers_match_numpy(driver: Driver, block: int) -> None:
    # Prepare: a spread of magnitudes, a zero block, values past fp16's range
    rng = np.random.default_rng(block)
    n = 260
    x = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    x[:block] = 0.0
    x[-3:] = [7e4, -1e5, 3e-8]
    residual = (np.arange(n, dtype=np.float32) % 7 - 3) * np.float32(0.01)
    nb = -(-n // block)
    # Execute
    reply = Reply(driver.run("update", pack(n, block, 0.5, x, residual)))
    norm, finite = float(reply.take(F32, 1)[0]), int(reply.take(I32, 1)[0])
    scaled = reply.take(F32, n)
    h, h_back = reply.take(np.uint16, n), reply.take(F32, n)
    h_res, res_h = reply.take(np.uint16, n), reply.take(F32, n)
    status = int(reply.take(I32, 1)[0])
    q, scales, q_back = reply.take(np.int8, n), reply.take(F32, nb), reply.take(F32, n)
    q_res, s_res, res_q = (
        reply.take(np.int8, n),
        reply.take(F32, nb),
        reply.take(F32, n),
    )
    # Assert
    assert reply.done() and status == 0
    assert norm == pytest.approx(NP.l2_norm(x), rel=1e-5)
    assert finite == 1
    np.testing.assert_array_equal(scaled, x * np.float32(0.5))
    np.testing.assert_array_equal(h, NP.fp16_quantize(x))
    np.testing.assert_array_equal(h_back, NP.fp16_dequantize(h))
    r = residual.copy()
    np.testing.assert_array_equal(h_res, NP.fp16_quantize(x, r))
    np.testing.assert_array_equal(res_h, r)
    want_q, want_s = NP.int8_quantize(x, block)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(scales, want_s)
    np.testing.assert_array_equal(q_back, NP.int8_dequantize(q, scales, block))
    r = residual.copy()
    want_q, want_s = NP.int8_quantize(x, block, r)
    np.testing.assert_array_equal(q_res, want_q)
    np.testing.assert_array_equal(s_res, want_s)
    np.testing.assert_array_equal(res_q, r)


def _log_args() -> np.ndarray:
    # the whole positive range, subnormals included, away from log's zero at 1
    x = np.logspace(-44, 38, 200_001, dtype=np.float64).astype(np.float32)
    return x[(x < 0.99) | (x > 1.01)]


def _tanh_args() -> np.ndarray:
    x = np.linspace(-20.0, 20.0, 200_001, dtype=np.float32)
    return x[x != 0]


# op code of eps_math_apply, arguments, float64 reference, error bound in ulps
MATH = {
    "exp": (0, np.linspace(-87.0, 88.5, 200_001, dtype=np.float32), np.exp, 2),
    "log": (1, _log_args(), np.log, 2),
    "tanh": (2, _tanh_args(), np.tanh, 3),
    "log1p": (3, np.logspace(-30, 0, 200_001, dtype=np.float32), np.log1p, 3),
}


@pytest.mark.parametrize("name", sorted(MATH))
def test_math_is_accurate_on_target(driver: Driver, name: str) -> None:
    # Prepare
    op, x, ref, max_ulps = MATH[name]
    # Execute
    reply = Reply(driver.run("math", pack(op, x.size, x)))
    got = reply.take(F32, x.size)
    # Assert: the error bounds of tests/native/test_math.py hold on the target
    want = ref(x.astype(np.float64))
    rel = np.abs(got.astype(np.float64) - want) / np.abs(want)
    assert reply.done()
    assert float(rel.max()) < max_ulps * ULP
