"""Metrics files read back, and what plots derive from them (pure, no matplotlib).

A metrics file (`--metrics-out`) holds one JSON snapshot per line. The
per-worker timeline is an estimate from consecutive snapshots: in an interval
where a worker had ``n`` pushes applied, it spent about ``n`` typical iterations
working (split into compute and communication by the monitor's typical
times), and the rest held at the barrier. A worker with no push applied in
the interval was in one long iteration, unless it was held at both ends. A
dead worker is dead for the interval that ends with it dead.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KINDS = ("computing", "communicating", "held", "dead", "busy")


@dataclass
class Run:
    """One run's snapshots, in file order, and the label plots give it."""

    label: str
    records: list[dict[str, Any]]
    path: str = ""
    skipped: int = 0  # lines that were not a snapshot (e.g. cut off by a crash)

    def series(self, key: str) -> tuple[list[float], list[float]]:
        """(elapsed, value) for every snapshot where ``key`` is a finite number."""
        xs: list[float] = []
        ys: list[float] = []
        for r in self.records:
            v = r.get(key)
            if isinstance(v, (int, float)) and math.isfinite(v):
                xs.append(float(r["elapsed"]))
                ys.append(float(v))
        return xs, ys


@dataclass(frozen=True)
class Segment:
    start: float
    duration: float
    kind: str  # one of KINDS


@dataclass
class Timeline:
    workers: dict[str, list[Segment]] = field(default_factory=dict)


def _is_snapshot(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("elapsed"), (int, float))
        and isinstance(obj.get("workers", {}), dict)
    )


def _read(path: str | Path) -> tuple[Path, list[dict[str, Any]], int]:
    """A metrics file's snapshots and how many lines were not snapshots."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such metrics file: {p}")
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if _is_snapshot(obj):
            records.append(obj)
        else:
            skipped += 1
    if skipped:
        log.warning("%s: skipped %d lines that are not snapshots", p, skipped)
    if not records:
        raise ValueError(f"{p}: no metrics snapshots in this file")
    return p, records, skipped


def split_runs(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Snapshots of runs appended to one file, one list per run: a new run
    starts where time goes backwards or the run id (``run``) changes."""
    runs: list[list[dict[str, Any]]] = []
    prev: dict[str, Any] | None = None
    for r in records:
        new_id = prev is not None and r.get("run") != prev.get("run")
        if prev is None or float(r["elapsed"]) < float(prev["elapsed"]) or new_id:
            runs.append([])
        runs[-1].append(r)
        prev = r
    return runs


def _label(records: list[dict[str, Any]], p: Path) -> str:
    return next((str(r["policy"]) for r in records if r.get("policy")), "") or p.stem


def load_run(path: str | Path) -> Run:
    """Read a metrics file as one run (the first, when runs were appended to it);
    lines that are not snapshots are counted and skipped."""
    return load_file(path)[0]


def load_file(path: str | Path) -> list[Run]:
    """Every run of a metrics file (runs appended to one file come apart)."""
    p, records, skipped = _read(path)
    parts = split_runs(records)
    runs = [Run(_label(part, p), part, path=str(p)) for part in parts]
    runs[0].skipped = skipped
    if len(runs) > 1:
        for i, r in enumerate(runs, 1):
            r.label = f"{r.label} (run {i} of {p.name})"
    return runs


def load_runs(paths: list[str]) -> list[Run]:
    """Every run of every file; two runs with one label get their file names added."""
    runs = [r for p in paths for r in load_file(p)]
    counts = Counter(r.label for r in runs)
    for r in runs:
        if counts[r.label] > 1:
            r.label = f"{r.label} ({Path(r.path).stem})"
    return runs


def _num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _interval(
    t0: float, dt: float, prev: dict[str, Any] | None, cur: dict[str, Any]
) -> list[Segment]:
    if cur.get("state") == "dead":
        return [Segment(t0, dt, "dead")]
    prev = prev or {}
    n = max(0, int(cur.get("accepted", 0)) - int(prev.get("accepted", 0)))
    held_throughout = bool(cur.get("waiting")) and bool(prev.get("waiting"))
    compute, comm = _num(cur.get("compute_s")), _num(cur.get("comm_s"))
    if n == 0:
        busy = 0.0 if held_throughout else dt
    elif compute is None or comm is None:
        busy = dt if not cur.get("waiting") else dt / 2  # no timings to say better
    else:
        busy = min(dt, n * (compute + comm))
    out: list[Segment] = []
    if compute is None or comm is None or compute + comm <= 0:
        if busy > 0:
            out.append(Segment(t0, busy, "busy"))
    else:
        c = busy * compute / (compute + comm)
        if c > 0:
            out.append(Segment(t0, c, "computing"))
        if busy - c > 0:
            out.append(Segment(t0 + c, busy - c, "communicating"))
    if dt - busy > 0:
        out.append(Segment(t0 + busy, dt - busy, "held"))
    return out


def timeline(records: list[dict[str, Any]]) -> Timeline:
    """Per worker, what it did between consecutive snapshots (see the module doc)."""
    tl = Timeline()
    for prev, cur in zip(records, records[1:], strict=False):
        t0, t1 = float(prev["elapsed"]), float(cur["elapsed"])
        if t1 <= t0:
            continue
        before = prev.get("workers", {})
        for wid, w in sorted(cur.get("workers", {}).items()):
            segs = tl.workers.setdefault(wid, [])
            segs.extend(_interval(t0, t1 - t0, before.get(wid), w))
    return tl


def share(tl: Timeline, worker_id: str) -> dict[str, float]:
    """Fraction of the worker's recorded time in each kind."""
    segs = tl.workers.get(worker_id, [])
    total = sum(s.duration for s in segs)
    out = dict.fromkeys(KINDS, 0.0)
    for s in segs:
        out[s.kind] += s.duration / total if total > 0 else 0.0
    return out


def staleness_counts(run: Run) -> dict[int, int]:
    """Applied updates by staleness (versions), from the newest snapshot with it."""
    for r in reversed(run.records):
        counts = r.get("staleness_counts")
        if isinstance(counts, dict) and counts:
            return {int(k): int(v) for k, v in sorted(counts.items(), key=_by_int)}
    return {}


def _by_int(item: tuple[str, Any]) -> int:
    return int(item[0])
