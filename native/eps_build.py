"""cffi (API mode) builder for the native kernels: `edgeps._native`."""

from __future__ import annotations

import os
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
SOURCES = ["eps.c"]

CDEF = """
typedef enum { EpsOk = 0, EpsErrLength, EpsErrValue, EpsStatusCount } EpsStatus;
const char *eps_status_str(EpsStatus status);
"""


def compile_args() -> list[str]:
    args = ["-O3", "-std=c99", "-fno-math-errno", "-fno-trapping-math"]
    if os.environ.get("EDGEPS_NATIVE_MARCH"):
        args.append("-march=" + os.environ["EDGEPS_NATIVE_MARCH"])
    return args


ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "edgeps._native",
    '#include "eps.h"',
    sources=[os.path.relpath(HERE / s) for s in SOURCES],
    include_dirs=[os.path.relpath(HERE)],
    extra_compile_args=compile_args(),
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
