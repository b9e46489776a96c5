"""One wording for a flag outside its range, in every command.

`serve`, `demo`, `emulate` and `simulate` share flags (``--workers``,
``--lr``, ``--batch``); each says the same mistake the same way:
``--lr must be a positive number in (0, 1000], got 0.0``.
"""

from __future__ import annotations

import math

from edgeps.runtime.config import RANGES, Range

LR = RANGES["lr"]
BATCH = Range("a number of rows", 1, 1_000_000)


def workers(high: int) -> Range:
    """How many workers a command can run."""
    return Range("a number of workers", 1, high)


def check_flag(flag: str, value: float | None, allowed: Range) -> None:
    """ValueError, in the one wording, when ``value`` is outside ``allowed``."""
    if value is None:
        return
    if not math.isfinite(value) or value not in allowed:
        raise ValueError(f"{flag} must be {allowed.text()}, got {value!r}")
