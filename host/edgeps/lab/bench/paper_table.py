"""The paper bench's pure part: runs read from serve's metrics, medians, the table.

A run's figures come from what serve wrote (its JSON summary and its
``--metrics-out`` snapshots) and what a passive broker client saw (the first
HELLO, the bytes); nothing here talks to a broker, so it is unit-tested alone.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from edgeps.lab.bench.paper_plan import (
    SIM_SLACK,
    describe,
    schedule_bound,
    sim_ratio,
    step_lr,
    update_bound,
)  # fmt: skip
from edgeps.observe.table import table as text_table


@dataclass
class PaperRun:
    """One real run (policy, seed) and, beside it, the simulator's prediction."""

    policy: str
    seed: int
    times: dict[str, float | None] = field(default_factory=dict)  # target -> s
    final_accuracy: float | None = None
    idle_fraction: float | None = None
    max_staleness: int | None = None
    bytes_per_worker: float | None = None
    pushes: dict[str, int] = field(default_factory=dict)  # worker -> accepted
    disturbed: str = ""
    stop_reason: str = ""
    error: str = ""
    stderr_tail: str = ""
    sim_times: dict[str, float | None] = field(default_factory=dict)
    sim_final_accuracy: float | None = None
    sim_idle_fraction: float | None = None
    sim_max_staleness: int | None = None
    simulated: bool = False  # the simulator ran beside this run
    sim_step_s: float | None = None  # the step (s) the simulator was given
    sim_skipped: bool = False  # skipped to keep the bench within --budget
    end_s: float | None = None  # s from the first HELLO to serve's exit
    step_s: float | None = None  # undisturbed workers' median compute (metrics)
    curve: list[tuple[float, float]] = field(default_factory=list)  # (s, accuracy)
    staleness: list[tuple[float, int]] = field(default_factory=list)  # its lag
    competitor: str = ""  # the competitor's mode (realtime or fair)
    cpu_in: float | None = None  # the disturbed worker's CPU s/s in bursts
    cpu_out: float | None = None  # and between them
    # (applied updates, their mean staleness, accuracy) per snapshot: paper_stale
    updates: list[tuple[int, float, float]] = field(default_factory=list)
    load_s: float | None = None  # s the workers took to load before serve started
    join_spread_s: float | None = None  # s from the first HELLO to the N-th
    rss_mb: float | None = None  # peak sum of the workers' resident memory

    @property
    def failed(self) -> bool:
        return bool(self.error)


def target_key(target: float) -> str:
    """The key of a target accuracy in ``times``: ``'0.95'``."""
    return f"{target:g}"


def read_metrics(lines: list[str]) -> list[dict[str, Any]]:
    """serve's ``--metrics-out`` JSON lines as dicts; bad or partial lines skipped."""
    import json

    out = []
    for line in lines:
        try:
            snap = json.loads(line)
        except ValueError:
            continue
        if isinstance(snap, dict):
            out.append(snap)
    return out


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def accuracy_curve(snaps: list[dict[str, Any]], t0: float) -> list[tuple[float, float]]:
    """(seconds since ``t0``, test accuracy) of every snapshot with an accuracy.

    ``t0`` is on the snapshots' clock (their ``time``, epoch seconds).
    """
    curve = []
    for s in snaps:
        t, acc = _num(s.get("time")), _num(s.get("accuracy"))
        if t is not None and acc is not None:
            curve.append((t - t0, acc))
    return curve


def time_to(curve: list[tuple[float, float]], target: float) -> float | None:
    """The first time the curve is at ``target`` or above; None if never."""
    return next((t for t, acc in curve if acc >= target), None)


def staleness_series(
    snaps: list[dict[str, Any]], worker: str, t0: float
) -> list[tuple[float, int]]:
    """(seconds since ``t0``, ``worker``'s lag) per snapshot.

    The lag (metrics' per-worker ``staleness``) is how many clocks the worker
    is behind the fastest live one: what SSP bounds by s.
    """
    out = []
    for s in snaps:
        t = _num(s.get("time"))
        w = (s.get("workers") or {}).get(worker)
        st = _num(w.get("staleness")) if isinstance(w, dict) else None
        if t is not None and st is not None:
            out.append((t - t0, int(st)))
    return out


def idle_fraction(snaps: list[dict[str, Any]]) -> float | None:
    """Mean over workers of the share of an iteration not computing, at the end.

    From the last snapshot's monitor means: ``comm_s`` (push to the next
    release: the wait at the barrier and the network) over ``iteration_s``.
    """
    for s in reversed(snaps):
        shares = []
        for w in (s.get("workers") or {}).values():
            if not isinstance(w, dict):
                continue
            comm, it = _num(w.get("comm_s")), _num(w.get("iteration_s"))
            if comm is not None and it:
                shares.append(min(1.0, max(0.0, comm / it)))
        if shares:
            return statistics.fmean(shares)
    return None


def _median(values: list[float | None]) -> float | None:
    """Median of the values; a None (not reached) counts as +infinity.

    None when half or more are None: the median run did not get there.
    """
    xs = sorted(math.inf if v is None else float(v) for v in values)
    if not xs:
        return None
    m = statistics.median(xs)
    return None if math.isinf(m) else m


@dataclass
class PaperRow:
    """Medians over seeds for one policy: real and simulated."""

    policy: str
    runs: int
    failed: int
    times: dict[str, float | None]
    final_accuracy: float | None
    idle_fraction: float | None
    max_staleness: float | None
    bytes_per_worker: float | None
    disturbed_share: float | None  # disturbed worker's pushes / mean of the others
    sim_times: dict[str, float | None]
    sim_final_accuracy: float | None
    sim_ratio: float | None = None  # sim / real time to the lowest target, one run

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def push_share(run: PaperRun) -> float | None:
    """The disturbed worker's accepted pushes over the mean of the others'."""
    others = [n for w, n in run.pushes.items() if w != run.disturbed]
    if run.disturbed not in run.pushes or not others or not sum(others):
        return None
    return run.pushes[run.disturbed] / statistics.fmean(others)


def build_rows(
    runs: list[PaperRun], policies: list[str], targets: list[float]
) -> list[PaperRow]:
    """One row per policy, in the order given: medians of its good runs."""
    rows = []
    for p in policies:
        mine = [r for r in runs if r.policy == p]
        good = [r for r in mine if not r.failed]
        keys = [target_key(t) for t in targets]

        def med(get: Any, among: list[PaperRun] = good) -> float | None:
            return _median([get(r) for r in among]) if among else None

        def med_known(get: Any, among: list[PaperRun] = good) -> float | None:
            vals = [v for v in (get(r) for r in among) if v is not None]
            return statistics.median(vals) if vals else None

        simmed = [r for r in good if r.simulated]
        lo = keys[0] if keys else ""

        rows.append(
            PaperRow(
                policy=p,
                runs=len(mine),
                failed=len(mine) - len(good),
                times={k: med(lambda r, k=k: r.times.get(k)) for k in keys},
                final_accuracy=med_known(lambda r: r.final_accuracy),
                idle_fraction=med_known(lambda r: r.idle_fraction),
                max_staleness=med_known(lambda r: r.max_staleness),
                bytes_per_worker=med_known(lambda r: r.bytes_per_worker),
                disturbed_share=med_known(push_share),
                sim_times={
                    k: med(lambda r, k=k: r.sim_times.get(k), simmed) for k in keys
                },  # fmt: skip
                sim_final_accuracy=med_known(lambda r: r.sim_final_accuracy, simmed),
                sim_ratio=med_known(
                    lambda r, lo=lo: sim_ratio(r.sim_times.get(lo), r.times.get(lo)),
                    simmed,
                ),
            )
        )
    return rows


def _t(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def table(rows: list[PaperRow], targets: list[float]) -> str:
    """The paper's table: real figures, the simulator's beside each time."""
    keys = [target_key(t) for t in targets]
    header = ["policy"]
    for k in keys:
        header += [f"t{k} s", "sim s"]
    header += ["sim/real", "final acc", "sim acc", "idle", "max stale", "kB/worker",
               "dist. pushes", "runs"]  # fmt: skip
    cells = []
    for r in rows:
        line = [r.policy]
        for k in keys:
            line += [_t(r.times.get(k)), _t(r.sim_times.get(k))]
        kb = None if r.bytes_per_worker is None else r.bytes_per_worker / 1e3
        line += [
            _f(r.sim_ratio, ".2f"),
            _f(r.final_accuracy, ".3f"),
            _f(r.sim_final_accuracy, ".3f"),
            _f(r.idle_fraction, ".2f"),
            _f(r.max_staleness, "g"),
            _f(kb, ".0f"),
            _f(r.disturbed_share, ".2f"),
            f"{r.runs - r.failed}/{r.runs}",
        ]
        cells.append(line)
    return text_table(header, cells)


def ratios(rows: list[PaperRow], target: float) -> dict[str, float | None]:
    """DSP's goals at ``target``: BSP / DSP, best SSP / DSP (time ratios), and
    DSP's final accuracy minus BSP's, in points; for the first row named dsp."""
    k = target_key(target)
    by = {r.policy: r for r in rows}
    dsp = next((r for r in rows if r.policy.startswith("dsp")), None)
    out: dict[str, float | None] = {"bsp_over_dsp": None, "ssp_over_dsp": None,
                                    "acc_points": None}  # fmt: skip
    if dsp is None:
        return out
    td = dsp.times.get(k)
    bsp = by.get("bsp")
    ssp = [t for r in rows if r.policy.startswith("ssp") if (t := r.times.get(k))]
    if td and bsp is not None and bsp.times.get(k):
        out["bsp_over_dsp"] = bsp.times[k] / td  # type: ignore[operator]
    if td and ssp:
        out["ssp_over_dsp"] = min(ssp) / td
    if bsp is not None and None not in (dsp.final_accuracy, bsp.final_accuracy):
        out["acc_points"] = 100 * (dsp.final_accuracy - bsp.final_accuracy)  # type: ignore[operator]
    return out


def failure_lines(runs: list[PaperRun]) -> list[str]:
    lines = []
    for r in runs:
        if r.failed:
            lines.append(f"{r.policy} seed {r.seed}: FAILED: {r.error}")
            lines += [f"    {x}" for x in r.stderr_tail.splitlines()]
    return lines


def header(args: Any, s: dict[str, Any], n: str, r: dict[str, Any]) -> str:
    """What the table is: job, disturbance, how a run stops, the simulator."""
    steps = [x.sim_step_s * 1e3 for x in r["runs"] if x.sim_step_s]
    step = ("off" if not steps else
            f"{min(steps):.0f}-{max(steps):.0f} ms, each real run's undisturbed "
            "workers' median compute time")  # fmt: skip
    lr = r.get("lr", args.lr)
    mt = r.get("max_time", args.max_time)
    stepped = step_lr(lr, int(n))
    push = "" if stepped == lr else f" (each push {stepped:g}: serve's lr x 16 / N)"
    made = "--lr" if args.lr is not None else f"the recipe for {n} workers"
    lines = [
        f"{args.model} on {args.dataset}, {n} CPython workers on a real mosquitto, "
        f"one disturbed ({describe(s['disturb'])}); {args.optimizer} lr {lr:g}"
        f"{push}, batch {args.batch} ({made}); wall s from the first HELLO, medians "
        f"of {s['seeds']} seed(s); a run stops at {s['stop']:g} or {mt:g} s",
        f"sim: the simulator beside the first {args.sim_seeds} seed(s) of a row, "
        f"bounded by {SIM_SLACK:g}x the real run's length; step {step}; sim/real: "
        f"its time to {min(s['targets']):g} over the real run's",
    ]
    skipped = sum(x.sim_skipped for x in r["runs"])
    if skipped:
        lines.append(f"sim: {skipped} simulation(s) skipped to stay within --budget")
    missed = [t for t in s["targets"] if t > s["stop"]]
    if missed:
        lines.append(
            f"t{'/'.join(f'{t:g}' for t in missed)}: empty by design: above where a "
            f"run stops ({s['stop']:g}, the most central training of the model "
            "reaches on this data; host/BENCHMARKS.md)"
        )
    return "\n".join(lines)


def goal_lines(r: dict[str, Any], s: dict[str, Any], n: int | None = None) -> list[str]:
    """DSP's goals at the lowest target, and what the schedule alone allows
    (with ``n`` workers: also what it allows when updates set the pace)."""
    lo = min(s["targets"])
    g = ratios(r["rows"], lo)
    bd, sd, pts = (("-" if v is None else f"{v:.2f}") for v in g.values())
    bound = schedule_bound(s["disturb"])
    lines = [
        f"at {lo:g}: BSP/DSP {bd}, best SSP/DSP {sd}, "
        f"DSP - BSP final accuracy {pts} points",
        f"the schedule alone allows BSP/DSP <= {bound:.2f} (BSP at the disturbed "
        f"worker's average pace, 1 / (1 - share x burst / period), DSP at best at "
        f"the others'): the 2x goal is {'' if bound >= 2 else 'not '}reachable "
        "at this disturbance",
    ]
    if n is not None:
        ub = update_bound(s["disturb"], n)
        lines.append(
            f"counting updates it allows BSP/DSP <= {ub:.2f} (N = {n}: per "
            "undisturbed iteration BSP applies N f updates, f the disturbed worker's "
            "average pace, and no policy more than N - 1 + f): 2x is "
            f"{'reachable only without loss' if round(ub, 9) >= 2 else 'not reachable'}"
            " unless DSP's updates train better than BSP's"
        )
    return lines


def cpu_lines(runs: list[PaperRun], share: float) -> list[str]:
    """What the competitor left the disturbed worker: its CPU in bursts and
    between (medians over runs), against the 1 - share a burst leaves it."""
    got = [(r.cpu_in, r.cpu_out) for r in runs if r.cpu_in is not None]
    if not got:
        return []
    cin = statistics.median(a for a, _ in got)
    cout = statistics.median(b for _, b in got if b is not None)
    mode = ",".join(sorted({r.competitor for r in runs if r.competitor}))
    return [
        f"the disturbed worker's CPU (s per s, median of {len(got)} runs): "
        f"{cin:.2f} in bursts, {cout:.2f} between; a burst leaves it "
        f"<= {1 - share:.2f} ({mode} competitor)"
    ]
