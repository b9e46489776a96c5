"""The paper bench's figure: accuracy against wall time per policy, how many
clocks the disturbed worker lags the fastest (the first seed of a row), and
staleness against accuracy: accuracy against applied updates (first seed) and
every run's mean staleness against its accuracy at equal applied updates."""

from __future__ import annotations

from typing import Any

from edgeps.lab.bench.paper_stale import stale_points


def plot(results: dict[str, Any], s: dict[str, Any], path: str) -> None:
    """Draw one column of four panels per worker count to ``path`` (.png, .svg)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "--plot needs matplotlib: pip install 'edgeps[plot]'"
        ) from exc
    counts = list(results)
    fig, axes = plt.subplots(4, len(counts), figsize=(6.5 * len(counts), 14),
                             squeeze=False)  # fmt: skip
    for col, n in enumerate(counts):
        acc, stale, work, points = (axes[row][col] for row in range(4))
        colour = {}
        for policy in s["policies"]:
            run = next((r for r in results[n]["runs"]
                        if r.policy == policy and not r.failed), None)  # fmt: skip
            if run is None:
                continue
            if run.curve:
                t, a = zip(*run.curve, strict=True)
                colour[policy] = acc.plot(t, a, label=policy)[0].get_color()
            if run.staleness:
                t, st = zip(*run.staleness, strict=True)
                stale.step(t, st, where="post", label=policy, color=colour.get(policy))
            if run.updates:
                u, m, a = zip(*run.updates, strict=True)
                work.plot(u, a, color=colour.get(policy),
                          label=f"{policy} (mean staleness {m[-1]:.1f})")  # fmt: skip
        for target in results[n].get("targets", s["targets"]):
            acc.axhline(target, color="grey", lw=0.5, ls=":")
            work.axhline(target, color="grey", lw=0.5, ls=":")
        acc.set_title(f"{n} workers, one disturbed")
        acc.set_ylabel("test accuracy")
        acc.set_ylim(0, 1)
        acc.legend(fontsize=7)
        stale.set_xlabel("wall seconds from the first HELLO")
        stale.set_ylabel("disturbed worker: clocks behind the fastest")
        stale.legend(fontsize=7)
        work.set_xlabel("applied updates")
        work.set_ylabel("test accuracy (seed of the first panel)")
        work.set_ylim(0.5, 1)
        work.legend(fontsize=7)
        at, pts = stale_points(results[n]["runs"], s["stop"])
        for policy in s["policies"]:
            mine = [(x, y) for p, _, x, y in pts
                    if p == policy and x is not None and y is not None]  # fmt: skip
            if mine:
                x, y = zip(*mine, strict=True)
                points.scatter(x, y, label=policy, color=colour.get(policy), s=18)
        points.set_xlabel(f"mean staleness of applied updates until {s['stop']:g} "
                          "(versions)")  # fmt: skip
        points.set_ylabel(f"test accuracy after {at} applied updates")
        points.set_title("staleness against accuracy, every run")
        points.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
