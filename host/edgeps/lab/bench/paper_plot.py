"""The paper bench's figure: accuracy against wall time per policy, and how
many clocks the disturbed worker lags the fastest (the first seed of a row)."""

from __future__ import annotations

from typing import Any


def plot(results: dict[str, Any], s: dict[str, Any], path: str) -> None:
    """Draw one pair of panels per worker count to ``path`` (.png, .svg)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "--plot needs matplotlib: pip install 'edgeps[plot]'"
        ) from exc
    counts = list(results)
    fig, axes = plt.subplots(2, len(counts), figsize=(6.5 * len(counts), 7),
                             squeeze=False)  # fmt: skip
    for col, n in enumerate(counts):
        acc, stale = axes[0][col], axes[1][col]
        for policy in s["policies"]:
            run = next((r for r in results[n]["runs"]
                        if r.policy == policy and not r.failed), None)  # fmt: skip
            if run is None:
                continue
            if run.curve:
                t, a = zip(*run.curve, strict=True)
                acc.plot(t, a, label=policy)
            if run.staleness:
                t, st = zip(*run.staleness, strict=True)
                stale.step(t, st, where="post", label=policy)
        for target in results[n].get("targets", s["targets"]):
            acc.axhline(target, color="grey", lw=0.5, ls=":")
        acc.set_title(f"{n} workers, one disturbed")
        acc.set_ylabel("test accuracy")
        acc.set_ylim(0, 1)
        acc.legend(fontsize=7)
        stale.set_xlabel("wall seconds from the first HELLO")
        stale.set_ylabel("disturbed worker: clocks behind the fastest")
        stale.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
