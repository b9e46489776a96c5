"""How a red-team row reports: HELD, or NOT HELD with what was seen."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def held(ok: bool, row: str, seen: object = "") -> None:
    """Assert one red-team row; the message says whether it HELD and what was seen."""
    assert ok, f"NOT HELD: {row}: {seen}"
    print(f"HELD: {row}")


def serve(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`edgeps serve` against a closed port: checks come before any connection."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "edgeps",
            "serve",
            "--broker",
            "mqtt://127.0.0.1:9",
            "--job",
            "lab",
            "--quiet",
            "--json",
            "--max-time",
            "3",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def refused_cleanly(
    done: subprocess.CompletedProcess[str], row: str, *needles: str | Path
) -> str:
    """Exit 2, one error line naming each needle, no traceback, no summary."""
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    seen = f"rc {done.returncode}, stderr {done.stderr[-600:]!r}"
    held(done.returncode == 2, row, seen)
    held("Traceback" not in done.stderr, row + " (no traceback)", seen)
    held(len(lines) == 1 and lines[0].startswith("edgeps serve: error: "), row, seen)
    held(done.stdout.strip() == "", row + " (no summary)", done.stdout[:200])
    for needle in needles:
        held(str(needle) in lines[0], f"{row} (names {needle})", lines[0])
    return lines[0]
