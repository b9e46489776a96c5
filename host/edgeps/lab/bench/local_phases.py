"""Where a local round's time goes, as the broker sees it: link plus compute, and host.

A passive client on the broker (the compression bench's ``Sniffer``, with a
timeline) notes when each worker's PARAMS and UPDATE cross the broker. Per
worker, a PARAMS followed by its UPDATE is one round as the broker sees it
(the downlink, the board's compute and the uplink); an UPDATE followed by
the next PARAMS to that worker is the host's part (ingest, apply, release,
and under a round policy the wait for the others). ``phases`` is the pure
part; ``timeline_run`` runs one cell of `edgeps bench local` with the
timeline on (`tools/local_round_phases.py`).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HELLO, UPDATE, PARAMS = "hello", "update", "params"


@dataclass(frozen=True)
class Spread:
    """Min, median and max of some seconds, and how many there were."""

    low: float
    median: float
    high: float
    n: int

    @classmethod
    def of(cls, xs: list[float]) -> Spread | None:
        if not xs:
            return None
        return cls(min(xs), float(statistics.median(xs)), max(xs), len(xs))

    def text(self) -> str:
        return (
            f"{self.median:.3f} s (min {self.low:.3f}, max {self.high:.3f}, n {self.n})"
        )


def phases(events: list[tuple[float, str, str]]) -> dict[str, Spread | None]:
    """Round and host seconds from (time, kind, worker) events at the broker.

    ``round``: PARAMS to that worker's next UPDATE; ``host``: UPDATE to the
    next PARAMS to that worker; ``first_update``: the first HELLO to the
    first UPDATE. A shared PARAMS (no worker) and other kinds are skipped.
    """
    by_worker: dict[str, list[tuple[float, str]]] = {}
    for t, kind, wid in sorted(events):
        if wid and kind in (UPDATE, PARAMS):
            by_worker.setdefault(wid, []).append((t, kind))
    rounds, host = [], []
    for seq in by_worker.values():
        for (ta, a), (tb, b) in zip(seq, seq[1:], strict=False):
            if (a, b) == (PARAMS, UPDATE):
                rounds.append(tb - ta)
            elif (a, b) == (UPDATE, PARAMS):
                host.append(tb - ta)
    hellos = [t for t, kind, _ in events if kind == HELLO]
    ups = [t for t, kind, _ in events if kind == UPDATE]
    first = [min(ups) - min(hellos)] if hellos and ups else []
    return {
        "round": Spread.of(rounds),
        "host": Spread.of(host),
        "first_update": Spread.of(first),
    }


def timeline_run(
    workers: int, scenario: str, row_name: str, seed: int, args: Any
) -> tuple[Any, list[tuple[float, str, str]]]:
    """One serve + emulate run of a cell on a private mosquitto; (run, events)."""
    import tempfile

    from edgeps.lab.bench import compression
    from edgeps.lab.bench import local as bench
    from edgeps.lab.bench.local_table import parse_row
    from edgeps.transport.broker import start_mosquitto

    events: list[tuple[float, str, str]] = []
    plain = compression.Sniffer._on_message

    def on_message(self: Any, client: Any, userdata: Any, message: Any) -> None:
        plain(self, client, userdata, message)
        try:
            msg = self.wire.decode(bytes(message.payload))
        except self.wire.WireError:
            return
        kind = {self.wire.HELLO: HELLO, self.wire.UPDATE: UPDATE,
                self.wire.PARAMS: PARAMS}.get(msg.type)  # fmt: skip
        if kind is not None:
            events.append((time.monotonic(), kind, str(msg.wid or "")))

    compression.Sniffer._on_message = on_message  # type: ignore[method-assign]
    try:
        with start_mosquitto() as b, tempfile.TemporaryDirectory() as tmp:
            row = parse_row(row_name)
            run = bench.run_cell_once(b.url, "phases", workers, scenario, row, seed,
                                      args, Path(tmp))  # fmt: skip
    finally:
        compression.Sniffer._on_message = plain  # type: ignore[method-assign]
    return run, events
