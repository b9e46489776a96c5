"""The table of `edgeps bench policies-broker`: medians, the best per row, sim ratio.

Pure logic: runs come in as `BrokerRun` records, rows go out as text or
dicts. A row is one (scenario, balancing) of the slice; its cells are the
policies. The summary of a cell is the policy matrix's own (`Entry`: medians
over seeds, a run that missed the target counting as slower than every run
that hit it) and the best policy per row is chosen as the matrix chooses it
(`CellResult.best`), over the runs that produced a result. A failed run is
kept, counted in its cell and listed with its stderr tail under the table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from edgeps.lab.matrix.grid import Cell, CellResult, Entry


@dataclass
class BrokerRun:
    """One real-broker run: serve + emulate for one policy, cell and seed."""

    policy: str
    scenario: str
    balance: bool
    seed: int
    time_to_target: float | None = None  # first HELLO to the target, None: missed
    final_accuracy: float | None = None
    updates: int = 0
    stop_reason: str = ""
    elapsed: float | None = None  # serve's own elapsed time
    updates_per_s: float = 0.0
    max_staleness: int = 0
    rejected: int = 0  # pushes serve refused, every worker's summed
    state: str = ""  # serve's job state at the end: learning, diverging, backed off
    error: str = ""  # empty: the run produced serve's JSON and both exited 0
    # seconds after the first HELLO: each worker's first HELLO (sorted), the
    # first UPDATE the broker carried
    joins: list[float] = field(default_factory=list)
    first_update: float | None = None
    # per sensor, payload bytes each way after serve's MODEL done (closing
    # messages: the final model, STOP, BYE), as the broker carried them
    closing_up: float | None = None
    closing_down: float | None = None
    stderr_tail: str = ""
    dataset: str = "sensors"

    @property
    def failed(self) -> bool:
        return bool(self.error)


@dataclass
class Row:
    """One (scenario, balancing): the real cells and the simulator's times."""

    cell: Cell
    real: CellResult
    sim: dict[str, float | None] = field(default_factory=dict)  # policy -> time
    failures: dict[str, list[BrokerRun]] = field(default_factory=dict)
    # the simulator's medians for the same cell, where run: its first choice
    sim_cell: CellResult | None = None

    def best(self) -> str | None:
        return self.real.best()

    def sim_firsts(self) -> list[str]:
        """The simulator's first choice and every policy it cannot tell from it
        (the same median time and accuracy, as ASP and DSP's default often)."""
        if self.sim_cell is None:
            return []
        best = self.sim_cell.best()
        if best is None:
            return []
        top = self.sim_cell.entries[best]
        return [
            p
            for p, e in self.sim_cell.entries.items()
            if e.time == top.time and e.accuracy == top.accuracy
        ]

    def agrees(self) -> bool | None:
        """Whether the real first choice is the simulator's (one of its tied
        firsts; neither reaching the target agrees); None: no simulator cell."""
        if self.sim_cell is None:
            return None
        real, firsts = self.best(), self.sim_firsts()
        return real in firsts if firsts else real is None

    def ratio(self, policy: str) -> float | None:
        """Real time over simulated time, None where either missed the target."""
        entry = self.real.entries.get(policy)
        real = entry.time if entry is not None else None
        sim = self.sim.get(policy)
        if real is None or sim is None or sim <= 0:
            return None
        return real / sim

    def to_dict(self, policies: list[str]) -> dict[str, Any]:
        cells = []
        for p in policies:
            entry = self.real.entries.get(p)
            failed = self.failures.get(p, [])
            cells.append(
                {
                    "policy": p,
                    "time_to_target": None if entry is None else entry.time,
                    "final_accuracy": None if entry is None else entry.accuracy,
                    "reached": 0
                    if entry is None
                    else sum(t is not None for t in entry.times),
                    "ok_runs": 0 if entry is None else len(entry.times),
                    "failed_runs": len(failed),
                    "sim_time_to_target": self.sim.get(p),
                    "real_over_sim": self.ratio(p),
                }
            )
        return {
            "dataset": self.cell.dataset,
            "workers": self.cell.workers,
            "scenario": self.cell.scenario,
            "balance": self.cell.balance,
            "best": self.best(),
            "sim_best": None if self.sim_cell is None else self.sim_cell.best(),
            "sim_firsts": self.sim_firsts(),
            "agrees": self.agrees(),
            "cells": cells,
        }


def build_rows(
    grid: list[Cell],
    runs: list[BrokerRun],
    sim: dict[tuple[Cell, str], float | None] | None = None,
    sim_cells: list[CellResult] | None = None,
) -> list[Row]:
    """Group runs into rows of ``grid`` (same order); attach the simulator's
    times (``sim``) and its cells (``sim_cells``, which give times too)."""
    rows = {c: Row(c, CellResult(c)) for c in grid}
    by_key = {(c.dataset, c.scenario, c.balance): c for c in grid}
    for r in runs:
        cell = by_key.get((r.dataset, r.scenario, r.balance))
        if cell is None:
            raise ValueError(
                f"run of {r.dataset}/{r.scenario}/{r.balance} is outside the grid"
            )
        row = rows[cell]
        if r.failed:
            row.failures.setdefault(r.policy, []).append(r)
            continue
        entry = row.real.entries.setdefault(r.policy, Entry(r.policy, [], [], []))
        entry.times.append(r.time_to_target)
        entry.accuracies.append(
            math.nan if r.final_accuracy is None else r.final_accuracy
        )
        entry.staleness.append(r.max_staleness)
    for (cell, policy), t in (sim or {}).items():
        if cell in rows:
            rows[cell].sim[policy] = t
    for result in sim_cells or []:
        if result.cell in rows:
            rows[result.cell].sim_cell = result
            for policy, e in result.entries.items():
                rows[result.cell].sim[policy] = e.time
    return [rows[c] for c in grid]


def agreement_line(rows: list[Row]) -> str:
    """How often the simulator's first choice is the real one, over the rows
    that have a simulator cell; strictly: its own first, ties not counted."""
    judged = [r for r in rows if r.agrees() is not None]
    k = sum(bool(r.agrees()) for r in judged)
    strict = sum(
        r.best() == (r.sim_cell.best() if r.sim_cell else None) for r in judged
    )
    return (
        f"simulator's first choice = real in {k} of {len(judged)} rows "
        f"({strict} of {len(judged)} counting only its own first of a tie)"
    )


def _first_text(row: Row) -> str:
    real = row.best() or "none"
    sim = "=".join(row.sim_firsts()) or "none"
    mark = {True: "yes", False: "NO", None: "-"}[row.agrees()]
    return f"{real} / {sim} {mark}"


def _num(v: float | None, spec: str) -> str:
    return "-" if v is None or not math.isfinite(v) else format(v, spec)


def _cell_text(row: Row, policy: str, with_sim: bool) -> str:
    entry = row.real.entries.get(policy)
    failed = len(row.failures.get(policy, []))
    if entry is None:
        real = "failed" if failed else "-"
    else:
        mark = "*" if row.best() == policy else " "
        real = f"{_num(entry.time, '.1f')} {_num(entry.accuracy, '.3f')}{mark}"
        if failed:
            real += f" f{failed}"
    if not with_sim:
        return real
    ratio = row.ratio(policy)
    return f"{real} | {_num(row.sim.get(policy), '.1f')} {_num(ratio, '.2f')}x"


def table(rows: list[Row], policies: list[str], *, with_sim: bool = True) -> str:
    """One line per row; per policy: real s, final acc (* best), sim s, real/sim;
    with the simulator's cells, the first choices, real / simulated."""
    named = any(r.cell.dataset != "sensors" for r in rows)
    head = ["dataset", "N"] if named else []
    head += ["scenario", "bal"]
    body = [
        ([r.cell.dataset, str(r.cell.workers)] if named else [])
        + [r.cell.scenario, "on" if r.cell.balance else "off"]
        + [_cell_text(r, p, with_sim) for p in policies]
        + ([_first_text(r)] if any(x.sim_cell for x in rows) else [])
        for r in rows
    ]
    head += [
        f"{p}: real s acc | sim s real/sim" if with_sim else f"{p}: real s acc"
        for p in policies
    ]
    if any(x.sim_cell for x in rows):
        head.append("first: real / sim agree")
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for b in body:
        lines.append("  ".join(c.ljust(w) for c, w in zip(b, widths, strict=True)))
    return "\n".join(line.rstrip() for line in lines)


def failure_lines(rows: list[Row]) -> list[str]:
    """Every failed run: where, why, and the last lines of its stderr."""
    out = []
    for row in rows:
        for runs in row.failures.values():
            for r in runs:
                bal = "on" if r.balance else "off"
                out.append(
                    f"FAILED {r.policy} {r.scenario} balance {bal} seed {r.seed}: "
                    f"{r.error}"
                )
                out.extend(f"    {line}" for line in r.stderr_tail.splitlines())
    return out
