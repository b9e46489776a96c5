"""Staleness against accuracy in the paper bench, from serve's metrics snapshots.

A row can be slower than another without waiting longer: its updates may
train less. Each snapshot has the applied updates so far (``updates``), their
staleness as counts (``staleness_counts``) and the last test accuracy; from
them a run gives a curve of (applied updates, mean staleness, accuracy), and
the runs of a bench give one point each: the mean staleness of the updates a
run applied against its accuracy after the same number of applied updates
(the fewest any run applied), so rows compare at equal work.
"""

from __future__ import annotations

import math
import statistics
from typing import Any

UpdatePoint = tuple[int, float, float]  # (applied updates, mean staleness, accuracy)


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return int(value)


def mean_staleness(counts: Any) -> float | None:
    """Mean staleness of applied updates from ``{staleness: count}`` (str keys
    as in the metrics file); None when there are none or the map is bad."""
    if not isinstance(counts, dict):
        return None
    total = weighted = 0
    for key, value in counts.items():
        try:
            s = int(key)
        except (TypeError, ValueError):
            return None
        n = _count(value)
        if n is None or s < 0:
            return None
        total += n
        weighted += s * n
    return weighted / total if total else None


def update_curve(snaps: list[dict[str, Any]]) -> list[UpdatePoint]:
    """(applied updates, their mean staleness, test accuracy) per snapshot
    that has all three; the accuracy is the snapshot's last evaluation."""
    out: list[UpdatePoint] = []
    for s in snaps:
        n = _count(s.get("updates"))
        acc = s.get("accuracy")
        mean = mean_staleness(s.get("staleness_counts"))
        if n is None or mean is None or isinstance(acc, bool):
            continue
        if isinstance(acc, (int, float)) and math.isfinite(acc):
            out.append((n, mean, float(acc)))
    return out


def accuracy_at(curve: list[UpdatePoint], updates: int) -> float | None:
    """Accuracy of the last point with at most ``updates`` applied; None if none."""
    best = None
    for n, _, acc in curve:
        if n > updates:
            break
        best = acc
    return best


def staleness_until(curve: list[UpdatePoint], target: float) -> float | None:
    """Mean staleness of the updates applied until the curve first reaches
    ``target`` (until its end if it never does); None for an empty curve."""
    for _, mean, acc in curve:
        if acc >= target:
            return mean
    return curve[-1][1] if curve else None


def common_updates(curves: list[list[UpdatePoint]]) -> int | None:
    """The fewest updates any non-empty curve ends at: every run has a point there."""
    ends = [c[-1][0] for c in curves if c]
    return min(ends) if ends else None


def stale_points(runs: list[Any], target: float) -> tuple[int | None, list[tuple]]:
    """Per run with a curve: (policy, seed, mean staleness until ``target``,
    accuracy at the common update count), and that count."""
    good = [r for r in runs if not r.failed and r.updates]
    at = common_updates([r.updates for r in good])
    pts = []
    if at is not None:
        for r in good:
            pts.append((r.policy, r.seed, staleness_until(r.updates, target),
                        accuracy_at(r.updates, at)))  # fmt: skip
    return at, pts


def stale_summary(runs: list[Any], target: float) -> dict[str, Any]:
    """``stale_points`` for the JSON: the common update count and the points."""
    at, pts = stale_points(runs, target)
    keys = ("policy", "seed", "mean_staleness", "accuracy")
    return {"updates": at, "points": [dict(zip(keys, p, strict=True)) for p in pts]}


def stale_lines(runs: list[Any], policies: list[str], target: float) -> list[str]:
    """One line: per row, median mean staleness and accuracy at equal updates."""
    at, pts = stale_points(runs, target)
    if at is None:
        return []
    parts = []
    for p in policies:
        mine = [(s, a) for q, _, s, a in pts if q == p]
        st = [s for s, _ in mine if s is not None]
        acc = [a for _, a in mine if a is not None]
        if st and acc:
            parts.append(f"{p} {statistics.median(st):.1f}/"
                         f"{statistics.median(acc):.3f}")  # fmt: skip
    if not parts:
        return []
    return [
        f"staleness against accuracy (medians over seeds): mean staleness of "
        f"applied updates until {target:g} / test accuracy after {at} applied "
        f"updates: " + ", ".join(parts)
    ]
