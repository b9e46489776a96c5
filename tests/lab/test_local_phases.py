"""The broker-side split of a local round: round (link + compute) and host."""

from __future__ import annotations

import pytest
from edgeps.lab.bench.local_phases import HELLO, PARAMS, UPDATE, Spread, phases


def test_rounds_and_the_hosts_part_are_paired_per_worker() -> None:
    # Prepare: two workers; w1 is slower; a shared PARAMS (no worker) and a
    # second HELLO are not rounds
    events = [
        (0.0, HELLO, "w0"), (0.01, HELLO, "w1"),
        (0.02, PARAMS, "w0"), (0.03, PARAMS, "w1"), (0.05, PARAMS, ""),
        (0.42, UPDATE, "w0"), (0.43, PARAMS, "w0"),
        (1.13, UPDATE, "w1"), (1.15, PARAMS, "w1"),
        (0.83, UPDATE, "w0"),
    ]  # fmt: skip

    # Execute
    got = phases(events)

    # Assert
    rounds, host, first = got["round"], got["host"], got["first_update"]
    assert rounds is not None and host is not None and first is not None
    assert rounds.n == 3 and rounds.median == pytest.approx(0.40)
    assert rounds.low == pytest.approx(0.40) and rounds.high == pytest.approx(1.10)
    assert host.n == 2 and host.high == pytest.approx(0.02)
    assert first.median == pytest.approx(0.42)
    assert rounds.text() == "0.400 s (min 0.400, max 1.100, n 3)"


def test_no_events_give_no_figures() -> None:
    assert phases([]) == {"round": None, "host": None, "first_update": None}
    assert Spread.of([]) is None
