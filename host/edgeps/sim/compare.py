"""Run several policies over several seeds and summarize each by its medians."""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any

from edgeps.policy import parse_policy
from edgeps.sim.simulator import simulate
from edgeps.sim.types import SimConfig, SimResult

# short names accepted on the command line for policies that need an option
ALIASES = {"kofn": "kofn:auto"}


def split_policies(text: str) -> list[str]:
    """Split "bsp,ssp:3,dsp:w=2,grace=4" into policies; ``k=v`` parts stay attached."""
    out: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            raise ValueError(f"empty policy in {text!r}")
        if "=" in part and ":" not in part and out:
            out[-1] += "," + part  # an option of the previous policy
        else:
            out.append(ALIASES.get(part, part))
    return out


@dataclass
class PolicySummary:
    """Medians over seeds of one policy's runs."""

    policy: str
    seeds: int
    reached: int  # seeds that reached the target accuracy
    time_to_target: float | None  # median; None if most seeds never reached it
    final_accuracy: float
    updates_per_s: float
    idle_fraction: float
    max_staleness: float
    runs: list[SimResult]
    # per board, up to the target (to the end if unreached): medians over seeds
    bytes_up_per_board: float = 0.0
    bytes_down_per_board: float = 0.0
    joules_per_board: float = 0.0

    def to_dict(self, *, with_runs: bool = False) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "runs"}
        if with_runs:
            out["runs"] = [r.to_dict(with_trace=False) for r in self.runs]
        return out


def _median_time(times: list[float | None]) -> float | None:
    # a run that never reached the target counts as infinitely slow
    med = statistics.median(math.inf if t is None else t for t in times)
    return None if math.isinf(med) else float(med)


def summarize(policy: str, runs: list[SimResult]) -> PolicySummary:
    """Medians of a policy's runs (time to target: unreached runs count as inf)."""
    if not runs:
        raise ValueError("no runs to summarize")
    return PolicySummary(
        policy=policy,
        seeds=len(runs),
        reached=sum(r.time_to_target is not None for r in runs),
        time_to_target=_median_time([r.time_to_target for r in runs]),
        final_accuracy=statistics.median(r.final_accuracy for r in runs),
        updates_per_s=statistics.median(r.updates_per_s for r in runs),
        idle_fraction=statistics.median(r.idle_fraction for r in runs),
        max_staleness=statistics.median(r.max_staleness for r in runs),
        runs=runs,
        bytes_up_per_board=statistics.median(r.bytes_up_per_board for r in runs),
        bytes_down_per_board=statistics.median(r.bytes_down_per_board for r in runs),
        joules_per_board=statistics.median(r.joules_per_board for r in runs),
    )


def compare(
    policies: list[str], base: SimConfig, seeds: int, *, first_seed: int = 0
) -> list[PolicySummary]:
    """Every policy on the same scenario and seeds (same data, same boards)."""
    if seeds < 1:
        raise ValueError("seeds must be >= 1")
    if not policies:
        raise ValueError("no policies to compare")
    for pol in policies:
        parse_policy(pol)  # a typo fails now, not after minutes of other runs
    out = []
    for pol in policies:
        runs = [
            simulate(dataclasses.replace(base, policy=pol, seed=first_seed + s))
            for s in range(seeds)
        ]
        out.append(summarize(pol, runs))
    return out


def speedup(summaries: list[PolicySummary], reference: str) -> dict[str, float | None]:
    """Reference time to target over each policy's (> 1: sooner than the reference)."""
    ref = next((s for s in summaries if s.policy == reference), None)
    out: dict[str, float | None] = {}
    for s in summaries:
        if ref is None or s.time_to_target is None:
            out[s.policy] = None
        elif ref.time_to_target is None:
            out[s.policy] = math.inf
        else:
            out[s.policy] = ref.time_to_target / s.time_to_target
    return out


def fmt_time(t: float | None, max_time: float) -> str:
    return f"> {max_time:g}" if t is None else f"{t:.2f}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    return "inf" if math.isinf(r) else f"{r:.2f}x"


def summary_cells(s: Any, max_time: float) -> list[str]:
    """The columns every policy table shares, after the policy and ratio columns."""
    return [
        fmt_time(s.time_to_target, max_time),
        f"{s.reached}/{s.seeds}",
        f"{s.final_accuracy:.4f}",
        f"{s.updates_per_s:.1f}",
        f"{s.idle_fraction:.2f}",
        f"{s.max_staleness:g}",
    ]
