"""`edgeps plot RUN.jsonl [RUN2.jsonl ...] -o FILE.png|.svg`: draw metrics files."""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN.jsonl",
        help="metrics files written by --metrics-out (one line per run and policy)",
    )
    parser.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="FILE",
        help="the figure to write: .png, .svg or .pdf",
    )


def run(args: argparse.Namespace) -> int:
    from edgeps.observe.plot import PlotUnavailable, check_output, run_figure, save
    from edgeps.observe.runs import load_runs

    try:
        check_output(args.output)
        runs = load_runs(args.runs)
        path = save(run_figure(runs), args.output)
    except (PlotUnavailable, ValueError, FileNotFoundError) as exc:
        print(f"edgeps plot: error: {exc}", file=sys.stderr)
        return 2
    skipped = sum(r.skipped for r in runs)
    note = f" ({skipped} lines that were not snapshots skipped)" if skipped else ""
    print(f"edgeps plot: {len(runs)} run(s) drawn to {path}{note}")
    return 0
