"""cffi (API mode) builder for the native kernels: `edgeps._native`.

setup.py names it in `cffi_modules`. The cdef is eps.h run through the C
preprocessor (public_cdef), so the binding declares exactly what the headers do.

Flags: -O3 -std=c99 with -fno-math-errno (sqrt becomes one instruction, no
errno) and -fno-trapping-math. Deliberately not -ffast-math: its
-ffinite-math-only lets the compiler drop NaN checks, and -fassociative-math
would fold the two-constant range reduction in eps_expf. Set
EDGEPS_NATIVE_MARCH (e.g. "native") to add -march=...; by default the build
stays portable and on x86-64 the hot kernels are built twice (baseline and
AVX2+FMA) with one picked at load time (see eps_port.h).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
SOURCES = [
    "eps.c",
    "eps_conv.c",
    "eps_math.c",
    "eps_model.c",
    "eps_optim.c",
    "eps_update.c",
    "eps_x86_avx2.c",
    "eps_dispatch.c",
]

PUBLIC_HEADER = "eps.h"


def public_cdef(cc: str | None = None) -> str:
    """The declarations of eps.h and the headers it includes, as cffi's cdef.

    The C preprocessor expands the headers themselves, so every prototype is
    written once. libc's stdint.h is replaced by an empty one: cffi knows the
    fixed-width types, and cannot parse the compiler-specific C of libc.
    """
    if cc is None:
        cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    with tempfile.TemporaryDirectory() as stub:
        Path(stub, "stdint.h").write_text("")
        cmd = [*shlex.split(cc), "-E", "-P", "-nostdinc", "-isystem", stub]
        try:
            res = subprocess.run(
                [*cmd, str(HERE / PUBLIC_HEADER)],
                capture_output=True,
                text=True,
                timeout=60,
            )
        except OSError as exc:
            raise RuntimeError(f"no C preprocessor ({cc}): {exc}") from exc
    if res.returncode != 0:
        raise RuntimeError(f"preprocessing {PUBLIC_HEADER} failed:\n{res.stderr}")
    return res.stdout


def compile_args(march: str = "") -> list[str]:
    """Compiler flags of the extension; `march` (if any) adds -march=<march>."""
    args = [
        "-O3",
        "-std=c99",
        "-fno-math-errno",
        "-fno-trapping-math",
        "-ffp-contract=fast",
    ]
    if march:
        # one target chosen by hand: no load-time dispatch needed
        args += ["-march=" + march, "-DEPS_NO_DISPATCH"]
    if sys.platform != "win32":
        args.append("-Wall")
    return args


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


CDEF = public_cdef()
FLAGS = compile_args(os.environ.get("EDGEPS_NATIVE_MARCH", "").strip())

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "edgeps._native",
    '#include "eps.h"',
    sources=[os.path.relpath(HERE / s) for s in SOURCES],
    # headers and this builder: setuptools puts an extension's depends in the
    # sdist, which must hold everything a wheel is built from
    depends=[
        os.path.relpath(p) for p in [*sorted(HERE.glob("*.h")), HERE / "eps_build.py"]
    ],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=FLAGS,
    define_macros=[("EPS_BUILD_FLAGS", _c_string(" ".join(FLAGS)))],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
