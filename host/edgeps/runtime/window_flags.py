"""``--window L --stride S --group COLUMN``: the flags that cut a raw-sample CSV
into windows, shared by `edgeps serve`, `edgeps worker` and `edgeps predict`."""

from __future__ import annotations

import argparse


def add_window_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """Add the three flags (no defaults: a file is windowed only with --window)."""
    parser.add_argument(
        "--window",
        type=int,
        metavar="L",
        help="a CSV of raw samples (one row per sample: channels, a label): cut "
        "it into windows of L samples; a window never crosses a change of label "
        "or --group",
    )
    parser.add_argument(
        "--stride",
        type=int,
        metavar="S",
        help="with --window: a window starts every S samples (default: L)",
    )
    parser.add_argument(
        "--group",
        metavar="COLUMN",
        help="with --window: the column naming each sample's recording or "
        "subject (not a feature); windows stay within one",
    )
