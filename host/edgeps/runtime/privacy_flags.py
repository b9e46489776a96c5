"""The differential-privacy flags `serve`, `demo` and `simulate` share.

``--dp off|central|local``, ``--dp-clip C``, ``--dp-noise SIGMA``,
``--dp-delta`` and ``--dp-epsilon-budget``; their defaults are the job
defaults (``edgeps.core.defaults.JOB``). ``edgeps.core.privacy.dp_mechanism``
turns them into the core's mechanism, ``edgeps.observe.privacy.make_ledger``
into the accountant that reports it.
"""

from __future__ import annotations

import argparse
from typing import Any

from edgeps.core.defaults import JOB
from edgeps.core.privacy import DP_MODES


def add_dp_flags(parser: argparse.ArgumentParser, *, layered: bool = False) -> None:
    """Add the flags; ``layered``: each defaults to "not given" (serve merges)."""
    g = parser.add_argument_group(
        "differential privacy (host/README.md, Privacy; needs edgeps[privacy])"
    )

    def default(name: str) -> dict[str, Any]:
        return (
            {"default": argparse.SUPPRESS}
            if layered
            else {"default": getattr(JOB, name)}
        )

    g.add_argument(
        "--dp",
        choices=DP_MODES,
        help="central: the PS clips and noises each applied update; local: each "
        f"CPython worker does before sending (default: {JOB.dp})",
        **default("dp"),
    )
    g.add_argument(
        "--dp-clip",
        type=float,
        metavar="C",
        help=f"L2 norm each update is clipped to (default: {JOB.dp_clip:g})",
        **default("dp_clip"),
    )
    g.add_argument(
        "--dp-noise",
        type=float,
        metavar="SIGMA",
        help="noise multiplier: Gaussian noise of standard deviation SIGMA x C "
        f"per coordinate (default: {JOB.dp_noise:g})",
        **default("dp_noise"),
    )
    g.add_argument(
        "--dp-delta",
        type=float,
        help=f"report epsilon at this delta (default: {JOB.dp_delta:g})",
        **default("dp_delta"),
    )
    g.add_argument(
        "--dp-epsilon-budget",
        type=float,
        metavar="EPS",
        help="stop the job once epsilon reaches EPS (default: 0, no limit)",
        **default("dp_epsilon_budget"),
    )
