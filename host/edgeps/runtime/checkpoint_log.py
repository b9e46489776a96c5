"""What became of a run's checkpoints: one log line per failure, and a summary.

A checkpoint that cannot be written (a full disk, a directory gone) must not
stop training, but it must not pass silently either: each failure is logged
as one line (what, where, why, and which version the file still holds), the
summary says how many failed and the last version saved, and ``serve`` exits
non-zero when the final one was lost. The file on disk is never touched by a
failed write (``save_checkpoint`` writes a temporary file and renames it).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("edgeps.runtime.checkpoint")


def reason_of(exc: BaseException) -> str:
    """One line for a failed write: the OS's words, not a traceback."""
    if isinstance(exc, OSError) and exc.strerror:
        return str(exc.strerror)
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


class CheckpointLog:
    """Counts the checkpoints saved and lost; remembers the last saved version."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.saved_count = 0
        self.failed_count = 0
        self.last_saved: int | None = None
        self.last_error = ""
        self.final_saved: bool | None = None  # None: no final checkpoint tried

    def saved(self, version: int, *, final: bool = False) -> None:
        self.saved_count += 1
        self.last_saved = int(version)
        if final:
            self.final_saved = True

    def failed(self, version: int, exc: BaseException, *, final: bool = False) -> None:
        self.failed_count += 1
        self.last_error = reason_of(exc)
        if final:
            self.final_saved = False
        kept = (
            f"{self.path} still holds v{self.last_saved}"
            if self.last_saved is not None
            else "no checkpoint saved in this run"
        )
        log.error(
            "%scheckpoint v%d not saved to %s: %s; %s",
            "final " if final else "",
            version,
            self.path,
            self.last_error,
            kept,
        )

    def report(self) -> dict[str, Any]:
        """The summary's ``checkpoints`` object ({} when the run keeps none)."""
        if self.path is None or self.saved_count + self.failed_count == 0:
            return {}
        return {
            "path": self.path,
            "saved": self.saved_count,
            "failed": self.failed_count,
            "last_saved_version": self.last_saved,
            "final_saved": self.final_saved,
            "last_error": self.last_error,
        }


def checkpoint_line(report: dict[str, Any]) -> str:
    """The summary table's line when a checkpoint failed ("" when none did)."""
    if not report.get("failed"):
        return ""
    last = report.get("last_saved_version")
    kept = (
        f"the last saved is v{last} in {report['path']}"
        if last is not None
        else f"none was saved to {report['path']}"
    )
    final = "" if report.get("final_saved") is not False else " (the final one too)"
    return (
        f"checkpoints: {report['failed']} of "
        f"{report['failed'] + report['saved']} failed{final}: "
        f"{report['last_error']}; {kept}"
    )
