"""The side-by-side table: medians per row, edgeps' speed-up over a peer, the goals.

Pure logic, no processes: runs come in as `PeerRun` records (one side, one
row, one scenario, one seed), a `Comparison` per scenario comes out, as text
or as a dict. Medians follow the policy matrix's rule: a run that missed the
target counts as slower than every run that reached it, and a row whose
median run missed it has no time. A speed-up is the peer's median seconds
over edgeps' (2.0: edgeps reached the target in half the time).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

# the goals: edgeps reaches the target this many times sooner than the peer
GOAL_EQUAL = 1.2  # edgeps' fedavg against the peer's FedAvg, same H
GOAL_BEST = 3.0  # edgeps' best row against the peer's FedAvg
EQUAL_ROW = "fedavg"  # the policy that runs the peer's algorithm


@dataclass
class PeerRun:
    """One run of one side: a row (framework + policy + H), a scenario, a seed."""

    side: str  # "edgeps" or the peer's name ("flower")
    row: str  # e.g. "fedavg/h8", "dsp", "FedAvg/h8"
    scenario: str
    seed: int
    time_to_target: float | None = None  # seconds, None: missed the target
    final_accuracy: float | None = None
    rounds: int | None = None  # the peer's rounds (edgeps: None)
    bytes_per_worker: float | None = None  # payload bytes one worker's share
    error: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.error)


def runs_from(
    data: dict[str, Any], side: str, scenarios: list[str], seeds: list[int]
) -> list[PeerRun]:
    """One side's runs from an earlier `compare.py --json` output, where asked."""
    fields = set(PeerRun.__dataclass_fields__)
    return [
        PeerRun(**{k: v for k, v in r.items() if k in fields})
        for r in data.get("runs", [])
        if r.get("side") == side
        and r.get("scenario") in scenarios
        and r.get("seed") in seeds
    ]


def median_time(times: list[float | None]) -> float | None:
    """Median seconds, a missed target counting as slower than any reached one."""
    if not times:
        return None
    med = statistics.median(math.inf if t is None else t for t in times)
    return None if math.isinf(med) else float(med)


def speedup(peer: float | None, ours: float | None) -> float | None:
    """How many times sooner edgeps reached the target: peer seconds / ours."""
    if peer is None or ours is None or ours <= 0:
        return None
    return peer / ours


@dataclass
class RowSummary:
    side: str
    row: str
    times: list[float | None] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    byte_counts: list[float] = field(default_factory=list)
    failures: list[PeerRun] = field(default_factory=list)

    @property
    def time(self) -> float | None:
        return median_time(self.times)

    @property
    def accuracy(self) -> float | None:
        return float(statistics.median(self.accuracies)) if self.accuracies else None

    @property
    def bytes_per_worker(self) -> float | None:
        """Median payload bytes per worker over the runs that counted them."""
        return float(statistics.median(self.byte_counts)) if self.byte_counts else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "side": self.side,
            "row": self.row,
            "time_to_target": self.time,
            "final_accuracy": self.accuracy,
            "bytes_per_worker": self.bytes_per_worker,
            "reached": sum(t is not None for t in self.times),
            "runs": len(self.times),
            "failed": len(self.failures),
            "times": self.times,
        }


def split_lr(row: str) -> tuple[str, float | None]:
    """A row's own lr, if it names one: "dsp@lr=0.01" -> ("dsp", 0.01)."""
    name, at, extra = row.partition("@")
    if not at:
        return row, None
    key, eq, value = extra.partition("=")
    try:
        lr = float(value) if key == "lr" and eq else math.nan
    except ValueError:
        lr = math.nan
    if not (math.isfinite(lr) and lr > 0) or not name:
        raise ValueError(f"bad row {row!r}: expected ROW or ROW@lr=X, X > 0")
    return name, lr


def local_steps(row: str) -> int:
    """H of a row name: "fedavg/h8" -> 8, "dsp" -> 1, "fedbuff/h4@lr=0.1" -> 4."""
    _, slash, h = row.partition("@")[0].rpartition("/h")
    return int(h) if slash and h.isdigit() else 1


def _soonest(rows: list[RowSummary]) -> RowSummary | None:
    reached = [r for r in rows if r.time is not None]
    if not reached:
        return None
    return min(reached, key=lambda r: (r.time, -(r.accuracy or 0.0)))


@dataclass
class Comparison:
    """One scenario: the peer's rows (FedAvg at one H or more) and edgeps' rows."""

    scenario: str
    peers: list[RowSummary]
    ours: list[RowSummary]

    def equal(self) -> RowSummary | None:
        """edgeps' row of the peer's algorithm: fedavg at any H, McMahan's mean
        (``fedavg:agg=mean``) first, as edgeps' own default is a trimmed mean."""
        rows = [r for r in self.ours if _policy(r.row)[0] == EQUAL_ROW]
        mean = [r for r in rows if "agg=mean" in _policy(r.row)[1].split(",")]
        return (mean or rows or [None])[0]

    def peer_equal(self) -> RowSummary | None:
        """The peer's row at the H of edgeps' fedavg row."""
        eq = self.equal()
        if eq is None:
            return None
        h = local_steps(eq.row)
        return next((p for p in self.peers if local_steps(p.row) == h), None)

    def best(self) -> RowSummary | None:
        """edgeps' row that reached the target soonest (then: higher accuracy)."""
        return _soonest(self.ours)

    def peer_best(self) -> RowSummary | None:
        """The peer's row that reached the target soonest."""
        return _soonest(self.peers)

    def speedups(self) -> dict[str, float | None]:
        """equal: fedavg against the peer at the same H; best: best against best."""
        eq, peq = self.equal(), self.peer_equal()
        best, pbest = self.best(), self.peer_best()
        return {
            "equal": speedup(_t(peq), _t(eq)),
            "best": speedup(_t(pbest), _t(best)),
        }

    def to_dict(self) -> dict[str, Any]:
        s = self.speedups()
        return {
            "scenario": self.scenario,
            "peer": [r.to_dict() for r in self.peers],
            "edgeps": [r.to_dict() for r in self.ours],
            "equal_row": _name(self.equal()),
            "peer_equal_row": _name(self.peer_equal()),
            "best_row": _name(self.best()),
            "peer_best_row": _name(self.peer_best()),
            "speedup_equal": s["equal"],
            "speedup_best": s["best"],
            "goal_equal": GOAL_EQUAL,
            "goal_best": GOAL_BEST,
            "met_equal": s["equal"] is not None and s["equal"] >= GOAL_EQUAL,
            "met_best": s["best"] is not None and s["best"] >= GOAL_BEST,
        }


def _policy(row: str) -> tuple[str, str]:
    """("fedavg", "agg=mean") of "fedavg:agg=mean/h8" (and of "...@lr=X")."""
    spec = split_lr(row)[0]
    if local_steps(spec) > 1 or spec.endswith("/h1"):
        spec = spec.rpartition("/h")[0]
    name, _, opts = spec.partition(":")
    return name, opts


def _t(r: RowSummary | None) -> float | None:
    return None if r is None else r.time


def _name(r: RowSummary | None) -> str | None:
    return None if r is None else r.row


def compare(runs: list[PeerRun], scenarios: list[str]) -> list[Comparison]:
    """Group runs into one comparison per scenario, rows in the order first seen."""
    out = []
    for scenario in scenarios:
        rows: dict[tuple[str, str], RowSummary] = {}
        for r in runs:
            if r.scenario != scenario:
                continue
            s = rows.setdefault((r.side, r.row), RowSummary(r.side, r.row))
            if r.failed:
                s.failures.append(r)
                continue
            s.times.append(r.time_to_target)
            if r.final_accuracy is not None:
                s.accuracies.append(r.final_accuracy)
            if r.bytes_per_worker is not None:
                s.byte_counts.append(r.bytes_per_worker)
        peers = [s for (side, _), s in rows.items() if side != "edgeps"]
        ours = [s for (side, _), s in rows.items() if side == "edgeps"]
        out.append(Comparison(scenario, peers, ours))
    return out


def _secs(t: float | None) -> str:
    return "-" if t is None else f"{t:.1f}"


def _mb(b: float | None) -> str:
    return "-" if b is None else f"{b / 1e6:.2f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def table(comparisons: list[Comparison]) -> str:
    """A markdown table: each row's median seconds and accuracy; edgeps' rows with
    their speed-up over the peer's row at the same H (fedavg) or its best row;
    MB per worker: the median payload megabytes one worker sent and received."""
    head = (
        "| scenario | side | row | s to target | final acc | reached | "
        "MB/worker | speed-up |"
    )
    lines = [head, "|---|---|---|---:|---:|---:|---:|---:|"]
    for c in comparisons:
        best, pbest, eq = c.best(), c.peer_best(), c.equal()
        for r in c.peers + c.ours:
            acc = "-" if r.accuracy is None else f"{r.accuracy:.3f}"
            mark = " *" if r is best or r is pbest else ""
            if r in c.peers:
                ratio = ""
            elif r is eq:
                ratio = f"{_x(speedup(_t(c.peer_equal()), r.time))} vs same H"
            else:
                ratio = f"{_x(speedup(_t(pbest), r.time))} vs best"
            failed = f" ({len(r.failures)} failed)" if r.failures else ""
            lines.append(
                f"| {c.scenario} | {r.side} | {r.row}{mark} | {_secs(r.time)} | "
                f"{acc} | {sum(t is not None for t in r.times)}/{len(r.times)}"
                f"{failed} | {_mb(r.bytes_per_worker)} | {ratio} |"
            )
    return "\n".join(lines)


def goal_lines(comparisons: list[Comparison]) -> list[str]:
    """One line per scenario and goal: the speed-up measured against the goal."""
    out = []
    for c in comparisons:
        d = c.to_dict()
        for key, name in (("equal", "same algorithm"), ("best", "best rows")):
            v, goal = d[f"speedup_{key}"], d[f"goal_{key}"]
            met = "met" if d[f"met_{key}"] else "NOT met"
            ours = d["equal_row"] if key == "equal" else d["best_row"]
            peer = d["peer_equal_row"] if key == "equal" else d["peer_best_row"]
            out.append(
                f"{c.scenario}, {name}: edgeps {ours or '-'} vs {peer or '-'}: "
                f"{_x(v)} sooner, goal {goal:g}x: {met}"
            )
    return out
