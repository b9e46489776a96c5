"""The matrix as a table, and its goals checked (balancing, DSP against the best)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from edgeps.lab.matrix.grid import Cell, CellResult, split_row
from edgeps.policy import parse_policy

BALANCE_SPEEDUP = 1.5  # BSP, balancing on vs off, in stragglers and mixed
BALANCE_SLOWDOWN = 1.05  # no cell may get slower than this with balancing on
DSP_TIME = 1.05  # DSP's time within this of the best policy's in every cell
DSP_ACC_POINTS = 0.5  # DSP's final accuracy at most this far below the best


def _fmt(t: float | None, max_time: float) -> str:
    if t is None:
        return f">{max_time:g}" if max_time else "never"
    return f"{t:.1f}"


def table(results: list[CellResult], max_time: float) -> str:
    """One row per cell: each policy's time to target and final accuracy; * = best."""
    policies = list(results[0].entries) if results else []
    header = ["dataset", "N", "scenario", "bal", *policies]
    rows = []
    for r in results:
        best = r.best()
        cells = []
        for p in policies:
            e = r.entries[p]
            mark = "*" if p == best else " "
            cells.append(f"{_fmt(e.time, max_time)} {e.accuracy:.3f}{mark}")
        c = r.cell
        rows.append(
            [c.dataset, str(c.workers), c.scenario, "on" if c.balance else "off"]
            + cells
        )
    widths = [max(len(x[i]) for x in [header, *rows]) for i in range(len(header))]

    def line(xs: list[str]) -> str:
        return "  ".join(
            x.ljust(widths[i]) if i < 4 else x.rjust(widths[i])
            for i, x in enumerate(xs)
        )

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(x) for x in rows)])


def usage_table(results: list[CellResult]) -> str:
    """One row per cell: each row's bytes up (kB) and joules per board to the target."""
    from edgeps.observe.table import table as plain_table

    policies = list(results[0].entries) if results else []
    header = ["dataset", "N", "scenario", "bal", *policies]
    rows = []
    for r in results:
        c = r.cell
        cells = []
        for p in policies:
            d = r.entries[p].to_dict()
            up, j = d["bytes_up_per_board"], d["joules_per_board"]
            cells.append("-" if up is None else f"{up / 1000:.0f} / {j:.2f}")
        on = "on" if c.balance else "off"
        rows.append([c.dataset, str(c.workers), c.scenario, on, *cells])
    return plain_table(header, rows)


def per_gradient(row: str) -> bool:
    """A row of a policy that applies each push, with one step per push: DSP's
    goals compare it with these (the federated rows trade steps for bytes)."""
    policy, local_steps = split_row(row)
    return local_steps == 1 and not parse_policy(policy).aggregates


def _t(t: float | None) -> float:
    return math.inf if t is None else t


def _ratio(a: float | None, b: float | None) -> float:
    """a / b with unreached as inf (inf / inf: 1, nothing changed)."""
    x, y = _t(a), _t(b)
    if math.isinf(x) and math.isinf(y):
        return 1.0
    return math.inf if y == 0 else x / y


def check_goals(results: list[CellResult]) -> list[dict[str, Any]]:
    """Each goal with its measured value, what it needs, and whether it holds."""
    by = {r.cell: r for r in results}
    goals: list[dict[str, Any]] = []

    def goal(name: str, value: float, need: str, ok: bool) -> None:
        goals.append({"goal": name, "value": value, "need": need, "ok": bool(ok)})

    worst, worst_at = 0.0, ""
    for cell, r in by.items():
        if not cell.balance:
            continue
        off = by.get(Cell(cell.dataset, cell.workers, cell.scenario, False))
        if off is None:
            continue
        for pol, e in r.entries.items():
            if pol not in off.entries:
                continue
            slower = _ratio(e.time, off.entries[pol].time)
            if slower > worst:
                worst, worst_at = slower, f"{cell.label()} {pol}"
            if cell.scenario in ("stragglers", "mixed") and pol == "bsp":
                gain = _ratio(off.entries[pol].time, e.time)
                goal(
                    f"balance: BSP off/on time, {cell.label()}",
                    gain,
                    f">= {BALANCE_SPEEDUP}",
                    gain >= BALANCE_SPEEDUP,
                )
    if worst_at:
        goal(
            f"balance: worst on/off time ({worst_at})",
            worst,
            f"<= {BALANCE_SLOWDOWN}",
            worst <= BALANCE_SLOWDOWN,
        )
    fastest: dict[str, list[bool]] = defaultdict(list)
    time_ok = acc_ok = 0
    worst_t, worst_t_at, worst_a, worst_a_at = 0.0, "", 0.0, ""
    for cell, r in by.items():
        if "dsp" not in r.entries:
            continue
        dsp = r.entries["dsp"]
        peers = [e for p, e in r.entries.items() if per_gradient(p)]
        others = [e for e in peers if e.policy != "dsp"]
        best_t = min((_t(e.time) for e in peers), default=math.inf)
        ratio = _ratio(dsp.time, best_t if math.isfinite(best_t) else None)
        gap = 100 * (max(e.accuracy for e in peers) - dsp.accuracy)
        time_ok += ratio <= DSP_TIME
        acc_ok += gap <= DSP_ACC_POINTS
        if ratio > worst_t:
            worst_t, worst_t_at = ratio, cell.label()
        if gap > worst_a:
            worst_a, worst_a_at = gap, cell.label()
        fastest[cell.scenario].append(
            dsp.time is not None and all(_t(dsp.time) < _t(e.time) for e in others)
        )
    n = sum(len(v) for v in fastest.values())
    if n:
        goal(
            f"dsp: cells within {DSP_TIME}x of the best time (worst {worst_t_at})",
            worst_t,
            f"{time_ok}/{n} cells, need all",
            time_ok == n,
        )
        goal(
            f"dsp: accuracy points below the best (worst {worst_a_at})",
            worst_a,
            f"{acc_ok}/{n} cells <= {DSP_ACC_POINTS}, need all",
            acc_ok == n,
        )
        share = {s: sum(v) / len(v) for s, v in fastest.items()}
        top = max(share, key=share.__getitem__)
        goal(
            f"dsp: strictly fastest share of a scenario's cells (best: {top})",
            share[top],
            "> 0.5 in one scenario",
            share[top] > 0.5,
        )
    return goals
