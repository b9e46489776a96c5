"""A process's CPU as a function of its load, from jobs measured at a few loads.

Serve's CPU per applied update falls as the load rises (host/BENCHMARKS.md,
"Capacity planner against measurement"): at a low load every message arrives
alone and pays a socket read and an inbox wake-up of its own; at a higher load
several share one. A single line (cores at no load plus a fixed cost per
update) cannot follow that, and which closed form would (a wake-up cost times a
wake-up rate that itself depends on the load and on how busy serve is) is not
known well enough to fit from two or three noisy points. So the curve is the
measurements themselves, joined by straight lines:

- below the lowest measured load, the line from the no-load point: where the
  two lowest points' line crosses zero load, kept between 0 and the lowest
  point's cores;
- between two measured loads, the straight line through them;
- past the highest measured load, the slope of the last segment (the
  marginal cost measured there, below the average cost per update at that
  load, as the measurements fall), never below zero.

Cores never fall as the load rises (a point below the one before it is
raised to it), so the curve can be inverted: ``capacity`` is the highest
load whose cores stay under a limit. ``per_unit`` adds a cost per unit of
load on top (the planner's per-parameter cost for a model of another size
than the jobs').
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Points = tuple[tuple[float, float], ...]


def curve(points: Sequence[tuple[float, float]]) -> Points:
    """(load, cores) points -> the curve's knots, (0, cores at no load) first.

    Loads must be > 0 and cores >= 0; points at the same load are averaged.
    """
    by_load: dict[float, list[float]] = {}
    for x, y in points:
        if not (x > 0 and y >= 0 and math.isfinite(x) and math.isfinite(y)):
            raise ValueError(f"a load point must have load > 0, cores >= 0: {x, y}")
        by_load.setdefault(float(x), []).append(float(y))
    if not by_load:
        raise ValueError("a load curve needs at least one measured point")
    knots: list[tuple[float, float]] = []
    for x in sorted(by_load):
        y = sum(by_load[x]) / len(by_load[x])
        knots.append((x, max(y, knots[-1][1]) if knots else y))
    if len(knots) == 1:
        idle = 0.0  # one point: cores in proportion to the load
    else:
        (x0, y0), (x1, y1) = knots[0], knots[1]
        idle = min(y0, max(0.0, y0 - (y1 - y0) / (x1 - x0) * x0))
    return ((0.0, idle), *knots)


def _slopes(knots: Points, per_unit: float) -> list[float]:
    """Each segment's slope, and the last one's again for past the end."""
    out = [
        (y1 - y0) / (x1 - x0) + per_unit
        for (x0, y0), (x1, y1) in zip(knots, knots[1:], strict=False)
    ]
    return [*out, max(0.0, out[-1])]


def cores_at(knots: Points, load: float, per_unit: float = 0.0) -> float:
    """Cores at ``load`` (>= 0), ``per_unit`` more per unit of load."""
    if load <= 0:
        return knots[0][1]
    slopes = _slopes(knots, per_unit)
    for i in range(1, len(knots)):
        if load <= knots[i][0]:
            x0 = knots[i - 1][0]
            return max(0.0, _y(knots, i - 1, per_unit) + slopes[i - 1] * (load - x0))
    last = len(knots) - 1
    return max(0.0, _y(knots, last, per_unit) + slopes[-1] * (load - knots[last][0]))


def _y(knots: Points, i: int, per_unit: float) -> float:
    return knots[i][1] + per_unit * knots[i][0]


def capacity(knots: Points, limit: float, per_unit: float = 0.0) -> float:
    """The highest load whose cores stay <= ``limit`` (inf if the curve is flat
    past its end below the limit; 0 if even no load is over it)."""
    if knots[0][1] > limit:
        return 0.0
    slopes = _slopes(knots, per_unit)
    for i in range(1, len(knots)):
        y0, y1 = _y(knots, i - 1, per_unit), _y(knots, i, per_unit)
        if y1 > limit:
            s = slopes[i - 1]
            return knots[i - 1][0] + ((limit - y0) / s if s > 0 else 0.0)
    last = len(knots) - 1
    if slopes[-1] <= 0:
        return math.inf
    return knots[last][0] + (limit - _y(knots, last, per_unit)) / slopes[-1]
