"""The public headers of native/: each compiles alone, and the cffi cdef is theirs."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

NATIVE = Path(__file__).resolve().parents[2] / "native"
UMBRELLA = "eps.h"


def public_headers() -> list[str]:
    """eps.h and every local header it includes: the library's public surface."""
    text = (NATIVE / UMBRELLA).read_text()
    return [UMBRELLA, *re.findall(r'^#include "([^"]+)"', text, flags=re.M)]


def test_umbrella_lists_the_family_headers() -> None:
    headers = public_headers()
    for name in ("eps_status.h", "eps_model.h", "eps_update.h", "eps_optim.h"):
        assert name in headers


@pytest.mark.parametrize("header", public_headers())
@pytest.mark.parametrize("lang", ["c", "c++"])
def test_public_header_compiles_alone(header: str, lang: str, tmp_path: Path) -> None:
    # Prepare: a translation unit that includes just this header
    if lang == "c":
        cc, flags = shutil.which("gcc") or shutil.which("cc"), ["-std=c99"]
    else:
        cc, flags = shutil.which("g++") or shutil.which("c++"), ["-std=c++11"]
    if cc is None:
        pytest.skip(f"no {lang} compiler (gcc/g++) on PATH")
    src = tmp_path / ("only." + ("c" if lang == "c" else "cpp"))
    src.write_text(f'#include "{header}"\n')
    # Execute
    res = subprocess.run(
        [cc, *flags, "-fsyntax-only", "-Wall", "-Wextra", "-pedantic", "-Werror"]
        + ["-I", str(NATIVE), str(src)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # Assert
    assert res.returncode == 0, res.stderr
