"""Run observability: JSON-lines metrics snapshots and a live progress display."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import IO, Any


def _json_safe(value: Any) -> Any:
    """NaN/inf are not JSON: write them as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _json_safe(value.item())
    if hasattr(value, "value") and isinstance(getattr(value, "value", None), str):
        return value.value  # enums such as WorkerState
    return value


def _plain(value: Any) -> Any:
    """json.dumps's ``default``: numpy scalars and enums as ``_json_safe`` maps them."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if hasattr(value, "value") and isinstance(getattr(value, "value", None), str):
        return value.value
    raise TypeError(f"not JSON: {type(value).__name__}")


def dumps(record: dict[str, Any]) -> str:
    """One record as JSON, NaN/inf as null.

    A record with thousands of worker rows is written every second: the
    plain encoder takes it in one pass, and only a record it refuses (a
    NaN or inf, keys of mixed types) takes the slower walk of ``_json_safe``.
    Both write the same JSON; the same text when every key is a string (int
    keys sort as numbers in the one, as text in the other).
    """
    try:
        return json.dumps(record, sort_keys=True, allow_nan=False, default=_plain)
    except (TypeError, ValueError):
        pass
    return json.dumps(_json_safe(record), sort_keys=True)


class MetricsWriter:
    """Append one JSON object per line, flushed each time (tail -f friendly)."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        if not path.parent.exists():
            raise FileNotFoundError(f"metrics directory does not exist: {path.parent}")
        self.path = path
        self._f: IO[str] | None = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        if self._f is None:
            return
        self._f.write(dumps(record) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None


def _fmt_acc(acc: float | None) -> str:
    return "  -  " if acc is None or not math.isfinite(acc) else f"{acc:.3f}"


def status_lines(record: dict[str, Any]) -> list[str]:
    """The human view of one metrics record: a headline plus one row per worker."""
    head = (
        f"[{record['elapsed']:7.1f}s] v{record['version']:<6} "
        f"acc {_fmt_acc(record.get('accuracy'))}  "
        f"{record['updates_per_s']:8.1f} upd/s  "
        f"max staleness {record.get('max_staleness', 0)}"
    )
    state = record.get("state", "learning")
    if state != "learning":
        head += f"  {state.upper()} (step x {record.get('step_scale', 1.0):g})"
    rows = [head]
    workers: dict[str, dict[str, Any]] = record.get("workers", {})
    for wid in sorted(workers):
        w = workers[wid]
        rows.append(
            f"  {wid:<14} clock {w.get('clock', 0):>6}  "
            f"staleness {w.get('staleness', 0):>3}  "
            f"{str(w.get('state', '?')):<9} {str(w.get('class', '?')):<10} "
            f"acc'd {w.get('accepted', 0):>6} rej {w.get('rejected', 0):>4}"
        )
    return rows


class Progress:
    """One refreshing block on a terminal; a headline per interval otherwise."""

    def __init__(self, stream: IO[str], *, interval: float = 2.0) -> None:
        self.stream = stream
        self.interval = interval
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._last_shown = -math.inf
        self._lines_drawn = 0

    def show(self, record: dict[str, Any], now: float, *, force: bool = False) -> None:
        if not force and now - self._last_shown < self.interval:
            return
        self._last_shown = now
        lines = status_lines(record)
        if self.tty:
            # move up over the previous block and redraw it in place
            if self._lines_drawn:
                self.stream.write(f"\x1b[{self._lines_drawn}F")
            self.stream.write("".join(f"\x1b[2K{line}\n" for line in lines))
            self._lines_drawn = len(lines)
        else:
            self.stream.write(lines[0] + "\n")
        self.stream.flush()
