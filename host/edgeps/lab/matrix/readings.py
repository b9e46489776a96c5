"""Each reading of DSP in a matrix, judged against the policies that are not DSP.

A matrix may carry several DSP rows (``dsp``, ``dsp:damp=1``, ...). Each is
counted on its own against the per-gradient rows that are not DSP (BSP, ASP,
SSP, ...): in how many cells it is within 5% of the fastest time to the
target, strictly the fastest, and within 0.5 points of the best final
accuracy. A cell that neither the row nor any row that is not DSP reached
counts only for accuracy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from edgeps.lab.matrix.grid import CellResult, split_row
from edgeps.lab.matrix.report import DSP_ACC_POINTS, DSP_TIME, per_gradient


@dataclass
class ReadingCounts:
    """How one DSP row fared over a matrix's cells."""

    row: str
    cells: int = 0  # cells with this row
    reached: int = 0  # cells where this row or a row not DSP reached the target
    within: int = 0  # of those: within DSP_TIME of the fastest other row
    fastest: int = 0  # of those: strictly sooner than every other row
    accurate: int = 0  # of all: within DSP_ACC_POINTS of the best other row
    worst: float = 1.0  # the largest time / fastest other's time
    worst_at: str = ""

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def is_dsp(row: str) -> bool:
    policy, _ = split_row(row)
    return policy.split(":")[0] == "dsp"


def _t(t: float | None) -> float:
    return math.inf if t is None else t


def reading_counts(results: list[CellResult]) -> list[ReadingCounts]:
    """One ``ReadingCounts`` per DSP row, in the matrix's row order."""
    rows = [p for r in results for p in r.entries]
    dsp_rows = [p for p in dict.fromkeys(rows) if is_dsp(p) and per_gradient(p)]
    out = []
    for row in dsp_rows:
        c = ReadingCounts(row)
        for r in results:
            e = r.entries.get(row)
            others = [
                o for p, o in r.entries.items() if per_gradient(p) and not is_dsp(p)
            ]
            if e is None or not others:
                continue
            c.cells += 1
            best_acc = max(o.accuracy for o in others)
            c.accurate += 100 * (best_acc - e.accuracy) <= DSP_ACC_POINTS
            best = min(_t(o.time) for o in others)
            mine = _t(e.time)
            if math.isinf(best) and math.isinf(mine):
                continue
            c.reached += 1
            ratio = mine / best if math.isfinite(best) else 0.0
            c.within += ratio <= DSP_TIME
            c.fastest += mine < best
            if ratio > c.worst:
                c.worst, c.worst_at = ratio, r.cell.label()
        out.append(c)
    return out


def counts_table(counts: list[ReadingCounts]) -> str:
    """The counts, one line per DSP row."""
    from edgeps.observe.table import table

    header = ["dsp row", "cells", "reached", "within 5%", "fastest", "acc", "worst"]
    rows = [
        [
            c.row,
            str(c.cells),
            str(c.reached),
            str(c.within),
            str(c.fastest),
            str(c.accurate),
            f"{c.worst:.2f}x {c.worst_at}",
        ]
        for c in counts
    ]
    return table(header, rows)
