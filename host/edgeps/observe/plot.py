"""Figures of runs and of policy comparisons (matplotlib, Agg backend).

The figure builders are pure: they take runs or simulator summaries and
return a `matplotlib.figure.Figure` without saving it, so tests can look at
its axes. matplotlib is an optional extra (`pip install 'edgeps[plot]'`);
without it, `require_matplotlib` raises `PlotUnavailable` with that advice.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgeps.observe.runs import Run, staleness_counts, timeline

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = (".png", ".svg", ".pdf")
COLORS = {
    "computing": "#3b7dd8",
    "communicating": "#f0a030",
    "held": "#d9d9d9",
    "dead": "#c0392b",
    "busy": "#7fa7e0",
}
TITLES = {
    "accuracy": "test accuracy",
    "rate": "applied updates/s",
    "staleness": "staleness of applied updates",
    "timeline": "worker timeline",
}


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def require_matplotlib() -> None:
    """Select the Agg backend, or say how to install matplotlib."""
    try:
        import matplotlib
    except ImportError as exc:
        raise PlotUnavailable(
            "plots need matplotlib, an optional extra: pip install 'edgeps[plot]'"
        ) from exc
    matplotlib.use("Agg")


def check_output(path: str) -> Path:
    """The output path, if its suffix is a format we write and its folder exists."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise ValueError(f"-o {path}: the file must end in {', '.join(FORMATS)}")
    if not p.resolve().parent.is_dir():
        raise FileNotFoundError(f"-o {path}: directory does not exist: {p.parent}")
    return p


def save(fig: Figure, path: str) -> Path:
    p = check_output(path)
    fig.savefig(p, dpi=110)
    return p


def _accuracy(ax: Axes, runs: list[Run], xlabel: str) -> None:
    for run in runs:
        xs, ys = run.series("accuracy")
        ax.plot(xs, ys, label=run.label, linewidth=1.6)
    ax.set_title(TITLES["accuracy"])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("accuracy")
    ax.grid(alpha=0.3)
    if runs:
        ax.legend(fontsize="small")


def _rate(ax: Axes, runs: list[Run]) -> None:
    for run in runs:
        xs, ys = run.series("updates_per_s")
        ax.plot(xs, ys, label=run.label, linewidth=1.2)
    ax.set_title(TITLES["rate"])
    ax.set_xlabel("seconds since start")
    ax.set_ylabel("updates/s")
    ax.grid(alpha=0.3)


def _staleness(ax: Axes, runs: list[Run]) -> None:
    width = 0.8 / max(1, len(runs))
    drawn = False
    for i, run in enumerate(runs):
        counts = staleness_counts(run)
        total = sum(counts.values())
        if not total:
            continue
        xs = [s + (i - (len(runs) - 1) / 2) * width for s in counts]
        ax.bar(xs, [n / total for n in counts.values()], width, label=run.label)
        drawn = True
    ax.set_title(TITLES["staleness"])
    ax.set_xlabel("staleness (parameter versions)")
    ax.set_ylabel("share of updates")
    if not drawn:
        ax.text(
            0.5,
            0.5,
            "no staleness counts in these files",
            ha="center",
            transform=ax.transAxes,
        )
    ax.grid(alpha=0.3, axis="y")


def _timeline(ax: Axes, run: Run) -> None:
    tl = timeline(run.records)
    wids = sorted(tl.workers)
    for row, wid in enumerate(wids):
        for kind, color in COLORS.items():
            spans = [(s.start, s.duration) for s in tl.workers[wid] if s.kind == kind]
            if spans:
                ax.broken_barh(spans, (row - 0.4, 0.8), color=color)
    ax.set_yticks(range(len(wids)), wids)
    ax.invert_yaxis()
    ax.set_title(f"{TITLES['timeline']}: {run.label}")
    ax.set_xlabel("seconds since start")
    from matplotlib.patches import Patch

    used = {s.kind for segs in tl.workers.values() for s in segs}
    handles = [Patch(color=c, label=k) for k, c in COLORS.items() if k in used]
    if handles:
        ax.legend(
            handles=handles,
            fontsize="small",
            ncols=len(handles),
            loc="upper center",
            bbox_to_anchor=(0.5, -0.25),
            frameon=False,
        )


def run_figure(runs: list[Run]) -> Figure:
    """Accuracy and applied updates/s against time, staleness, one timeline per run."""
    require_matplotlib()
    from matplotlib.figure import Figure

    if not runs:
        raise ValueError("no runs to plot")
    n_workers = max(len(timeline(r.records).workers) for r in runs)
    tl_height = 0.9 + 0.28 * max(1, n_workers)
    fig = Figure(figsize=(12, 3.6 + 3.2 + tl_height * len(runs)), layout="constrained")
    grid = fig.add_gridspec(
        2 + len(runs), 2, height_ratios=[3.6, 3.2] + [tl_height] * len(runs)
    )
    _accuracy(fig.add_subplot(grid[0, 0]), runs, "seconds since start")
    _rate(fig.add_subplot(grid[0, 1]), runs)
    _staleness(fig.add_subplot(grid[1, :]), runs)
    for i, run in enumerate(runs):
        _timeline(fig.add_subplot(grid[2 + i, :]), run)
    return fig


def compare_figure(summaries: list[Any], *, max_time: float, title: str = "") -> Figure:
    """Simulated policies side by side: accuracy curves, time to target, rates, idle.

    ``summaries`` are `edgeps.sim.compare.PolicySummary`; the curve of each
    policy is its first seed's run, the bars are medians over seeds.
    """
    require_matplotlib()
    from matplotlib.figure import Figure

    if not summaries:
        raise ValueError("no policies to plot")
    fig = Figure(figsize=(12, 7.5), layout="constrained")
    if title:
        fig.suptitle(title)
    ax_acc, ax_t, ax_rate, ax_idle = fig.subplots(2, 2).flat
    for s in summaries:
        trace = s.runs[0].trace if s.runs else []
        ax_acc.plot([t for t, _ in trace], [a for _, a in trace], label=s.policy)
    ax_acc.set_title(TITLES["accuracy"])
    ax_acc.set_xlabel("virtual seconds")
    ax_acc.set_ylabel("accuracy")
    ax_acc.grid(alpha=0.3)
    ax_acc.legend(fontsize="small")
    names = [s.policy for s in summaries]
    reached = [s.time_to_target is not None for s in summaries]
    times = [
        max_time if t is None else t for t in (s.time_to_target for s in summaries)
    ]
    bars = ax_t.bar(
        names, times, color=["#3b7dd8" if r else "#bbbbbb" for r in reached]
    )
    for bar, ok in zip(bars, reached, strict=True):
        if not ok:
            bar.set_hatch("//")
    ax_t.set_title("time to target (median; grey: not reached)")
    ax_t.set_ylabel("virtual seconds")
    ax_rate.bar(names, [s.updates_per_s for s in summaries], color="#f0a030")
    ax_rate.set_title(TITLES["rate"])
    ax_rate.set_ylabel("updates/s")
    ax_idle.bar(names, [s.idle_fraction for s in summaries], color="#999999")
    ax_idle.set_title("idle fraction (not computing)")
    ax_idle.set_ylim(0, 1)
    for ax in (ax_t, ax_rate, ax_idle):
        ax.tick_params(axis="x", labelrotation=30)
        ax.grid(alpha=0.3, axis="y")
    return fig
