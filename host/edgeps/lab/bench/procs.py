"""The benches' child processes: an ``edgeps`` command line, a log's tail, a stop."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TAIL_LINES = 8  # lines of a failed run's stderr shown under a table


def edgeps(*args: str) -> list[str]:
    """``python -m edgeps ARGS`` with this interpreter (the bench's own install)."""
    return [sys.executable, "-m", "edgeps", *args]


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a log, or "" when it cannot be read."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def stop(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """Wait up to ``timeout`` s, else kill: the exit code, None if killed."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        return None


def kill(proc: subprocess.Popen[bytes] | None) -> None:
    """Kill ``proc`` if it still runs (the end of a run, in a finally)."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait(10)
