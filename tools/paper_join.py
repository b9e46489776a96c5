"""Join slices of `edgeps bench paper --json` (split by --policies) into one table.

Runs are deterministic per seed apart from timing, so rows measured in
separate commands (each short enough to run alone on a quiet box) join into one
table: the runs of every file, per worker count, rows in the order the files
name their policies; the header and goal lines as the bench prints them, and
one figure with --plot.

    python tools/paper_join.py out/a.json out/b.json --plot tools/img/x.png
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from edgeps.lab.bench.paper import text_lines
from edgeps.lab.bench.paper_table import PaperRun, build_rows


def _run(d: dict[str, Any]) -> PaperRun:
    d = dict(d)
    d["curve"] = [tuple(x) for x in d.get("curve", [])]
    d["staleness"] = [tuple(x) for x in d.get("staleness", [])]
    d["updates"] = [tuple(x) for x in d.get("updates", [])]
    return PaperRun(**d)


def join(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the first file's config with every file's policies, results per N)."""
    config = dict(docs[0]["config"])
    policies: list[str] = []
    results: dict[str, Any] = {}
    for doc in docs:
        policies += [p for p in doc["config"]["policies"] if p not in policies]
        for n, r in doc["results"].items():
            into = results.setdefault(n, {**r, "runs": []})
            # slices from before the recipe per N carried no lr or targets
            into.setdefault("targets", config["targets"])
            into.setdefault("stop", config["stop"])
            into.setdefault("max_time", config["max_time"])
            into["runs"] += [_run(x) for x in r["runs"]]
    config["policies"] = policies
    for r in results.values():
        r["rows"] = build_rows(r["runs"], policies, r["targets"])
    return config, results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--plot", default=None)
    a = ap.parse_args()
    docs = []
    for path in a.files:
        with open(path) as f:
            docs.append(json.load(f))
    config, results = join(docs)
    args = argparse.Namespace(**config)
    for n, r in results.items():
        print("\n" + "\n".join(text_lines(args, config, n, r)))
    walls = [d.get("wall_seconds") or 0 for d in docs]
    print(f"\n{sum(len(r['runs']) for r in results.values())} runs from "
          f"{len(docs)} command(s), {sum(walls):.0f} s wall in all")  # fmt: skip
    if a.plot:
        from edgeps.lab.bench.paper_plot import plot

        plot(results, config, a.plot)


if __name__ == "__main__":
    main()
