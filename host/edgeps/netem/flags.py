"""The ``--link-rate/--link-delay/--link-loss`` flags of `emulate` and `simulate`."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from edgeps.netem.units import parse_duration, parse_loss, parse_rate


def _flag_type(parse: Callable[[str], float]) -> Callable[[str], float]:
    def convert(text: str) -> float:
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    convert.__name__ = parse.__name__
    return convert


def add_link_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "slow links",
        "shape every sensor's link both ways: a token bucket at RATE over the "
        "MQTT bytes, a one-way DELAY, and TCP segment loss paid as a "
        "retransmission timeout (200 ms + RTT); any of them overrides the "
        "scenario's link",
    )
    group.add_argument(
        "--link-rate",
        type=_flag_type(parse_rate),
        metavar="RATE",
        help="bandwidth each way: 250kbit, 1mbit, 64kbps (bytes/s, as in tc)",
    )
    group.add_argument(
        "--link-delay",
        type=_flag_type(parse_duration),
        metavar="DELAY",
        help="one-way delay: 20ms, 0.02s",
    )
    group.add_argument(
        "--link-loss",
        type=_flag_type(parse_loss),
        metavar="P",
        help="chance a TCP segment is lost: 0.01 or 1%%",
    )


def link_overrides(args: argparse.Namespace) -> dict[str, float | None]:
    """The flags as keyword arguments: link_rate, link_delay, link_loss."""
    return {
        "link_rate": args.link_rate,
        "link_delay": args.link_delay,
        "link_loss": args.link_loss,
    }
