"""The scale rows of `edgeps bench policies`: each policy at 64 and 512 workers.

Staleness grows with the number of workers (a push lands after the others'
pushes of one iteration time), so a policy that wins at 8 boards may not at
500. Each row is one policy at one size in one scenario, medians over
seeds, with the wall time the simulator took (it runs the real core), so
the same table says how far the simulator itself scales.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from edgeps.sim.compare import compare
from edgeps.sim.types import SimConfig

SIZES = "64,512"
SCENARIO = "mixed"
MAX_TIME = 30.0  # virtual seconds per run


def configure(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("scale rows")
    g.add_argument(
        "--scale-sizes",
        default=SIZES,
        help=f"worker counts of the scale rows (default {SIZES}; '' for none)",
    )
    g.add_argument("--scale-scenario", default=SCENARIO, help=f"default {SCENARIO}")
    g.add_argument("--scale-seeds", type=int, default=1, help="seeds per row")
    g.add_argument(
        "--scale-max-time",
        type=float,
        default=MAX_TIME,
        help=f"virtual seconds per run (default {MAX_TIME:g})",
    )


def sizes(text: str) -> list[int]:
    out = [int(x) for x in text.split(",") if x.strip()]
    if any(n < 1 for n in out):
        raise ValueError(f"scale sizes must be >= 1, got {text!r}")
    return out


def scale_rows(
    policies: list[str],
    worker_counts: list[int],
    scenario: str,
    seeds: int,
    max_time: float,
    first_seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per (workers, policy): the summary and the wall seconds per run."""
    rows = []
    for n in worker_counts:
        base = SimConfig(n_workers=n, scenario=scenario, max_time=max_time)
        for policy in policies:
            t0 = time.perf_counter()
            (summary,) = compare([policy], base, seeds, first_seed=first_seed)
            wall = (time.perf_counter() - t0) / seeds
            events = sorted(r.events for r in summary.runs)[len(summary.runs) // 2]
            rows.append(
                {
                    "workers": n,
                    "scenario": scenario,
                    **summary.to_dict(),
                    "wall_s_per_run": wall,
                    "events_per_run": events,
                    "target_accuracy": base.target_accuracy,
                    "max_time": max_time,
                }
            )
    return rows


def print_rows(rows: list[dict[str, Any]]) -> None:
    from edgeps.observe.table import table
    from edgeps.sim.compare import summary_cells

    if not rows:
        return
    r0 = rows[0]
    print(
        f"\nat scale: {r0['scenario']}, target accuracy {r0['target_accuracy']:g}, "
        f"{r0['max_time']:g} virtual s, medians over {r0['seeds']} seed(s); "
        "wall: seconds the simulator took per run"
    )
    header = ["policy", "workers", "t_target_s", "reached", "final_acc",
              "updates/s", "idle", "max_stale", "wall_s"]  # fmt: skip
    cells = []
    for r in rows:
        s = argparse.Namespace(**r)
        cells.append(
            [
                r["policy"],
                str(r["workers"]),
                *summary_cells(s, r["max_time"]),
                f"{r['wall_s_per_run']:.1f}",
            ]  # fmt: skip
        )
    print(table(header, cells))
