"""Where the board benchmarks find the MicroPython unix binary and the firmware."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def micropython_path() -> str | None:
    """The MicroPython unix binary next to this interpreter, or on PATH."""
    exe = Path(sys.executable).with_name("micropython")
    return str(exe) if exe.exists() else shutil.which("micropython")


def firmware_dir() -> Path:
    """The directory that holds the ``edgeps_worker`` package (MICROPYPATH)."""
    import edgeps_worker

    return Path(edgeps_worker.__file__).resolve().parent.parent
