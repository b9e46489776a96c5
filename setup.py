"""Builds the `edgeps._native` cffi extension; the metadata is in pyproject.toml.

cffi's documented setuptools integration (`cffi_modules`), with two settings:
build_ext always recompiles, so objects in a stale build/ directory (other
EDGEPS_NATIVE_MARCH flags, older headers) never end up in a wheel; and the
extension is optional: without a working C compiler (and Python's headers)
the package installs without it and runs on its numpy kernels (`edgeps info`
says which backend runs).
"""

import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import setup

NO_COMPILER = (
    "edgeps: no working C compiler ({reason}); installing without the C "
    "kernels: edgeps runs on numpy (install gcc and python3-dev, then "
    "reinstall, for the C kernels)"
)


def compiler_problem() -> str:
    """Why the cffi extension cannot be built here; empty when it can."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    include = sysconfig.get_paths()["include"]
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "probe.c")
        src.write_text("#include <Python.h>\nint edgeps_probe(void) { return 0; }\n")
        for step in (["-E", "-P"], ["-c", "-o", str(Path(tmp, "probe.o"))]):
            cmd = [*shlex.split(cc), *step, "-I", include, str(src)]
            try:
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            except (OSError, subprocess.TimeoutExpired) as exc:
                return f"{cc}: {exc}"
            if res.returncode != 0:
                lines = res.stderr.strip().splitlines()
                return f"{cc} {step[0]} failed: {lines[-1] if lines else 'no output'}"
    return ""


problem = compiler_problem()
if problem:
    print(NO_COMPILER.format(reason=problem), file=sys.stderr)
    setup()
else:
    setup(
        cffi_modules=["native/eps_build.py:ffibuilder"],
        options={"build_ext": {"force": True}},
    )
