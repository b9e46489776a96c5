"""The paper bench's start: workers load first, serve starts once all are waiting.

N CPython workers on 2 cores take seconds to import and read their data (32
of them: tens of seconds), and they would not finish together. A worker
joins only once the job's retained MODEL says ``running``, so the bench
starts the workers first, waits until every one has logged that its data is
loaded (``READY_MARK``, then it connects and waits for the MODEL), and only
then starts serve: the joins come within a fraction of a second of each
other and no row is charged for slow starts. ``RssSampler`` sums the
workers' resident memory while they run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

READY_MARK = "local samples from"  # edgeps worker's info line once its data is in


def ready_count(logs: list[Path]) -> int:
    """How many of the workers' log files say their data is loaded."""
    n = 0
    for path in logs:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        n += READY_MARK in text
    return n


def wait_ready(logs: list[Path], alive: Callable[[], int], timeout: float,
               poll: float = 0.2) -> tuple[int, float]:  # fmt: skip
    """Wait until every worker is ready, one died, or ``timeout`` s passed.

    ``alive`` counts the workers still running. Returns (ready, seconds waited).
    """
    t0 = time.monotonic()
    while True:
        ready = ready_count(logs)
        waited = time.monotonic() - t0
        if ready >= len(logs) or alive() < len(logs) or waited >= timeout:
            return ready, waited
        time.sleep(poll)


def vm_rss_kb(status: str) -> int | None:
    """The ``VmRSS`` of a /proc/PID/status text, in kB; None when absent."""
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1])
    return None


def rss_sum_kb(pids: list[int]) -> int:
    """Resident memory of the running ``pids`` together, in kB."""
    total = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += vm_rss_kb(text) or 0
    return total


class RssSampler:
    """The largest sum of the workers' resident memory, sampled every ``every`` s."""

    def __init__(self, pids: list[int], every: float = 1.0) -> None:
        self.pids, self.every, self.peak_kb = list(pids), every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kb = max(self.peak_kb, rss_sum_kb(self.pids))
            self._stop.wait(self.every)

    def stop(self) -> int:
        """Stop sampling; the peak in kB."""
        self._stop.set()
        self._thread.join(5)
        return self.peak_kb


def join_spread(hellos: dict[str, Any], n: int) -> float | None:
    """Seconds from the first worker's HELLO to the n-th distinct one's;
    None when fewer than n said HELLO."""
    times = sorted(float(t) for t in hellos.values())
    if len(times) < n or n < 1:
        return None
    return times[n - 1] - times[0]


def start_line(runs: list[Any], n: int) -> str | None:
    """How the runs started: workers' load time, the joins' spread, memory."""
    load = [r.load_s for r in runs if r.load_s is not None]
    spread = [r.join_spread_s for r in runs if r.join_spread_s is not None]
    rss = [r.rss_mb for r in runs if r.rss_mb]
    if not load:
        return None
    text = (f"start: the {n} workers loaded their data in {min(load):.1f}-"
            f"{max(load):.1f} s before serve was started (not counted)")  # fmt: skip
    if spread:
        text += (f"; all {n} HELLOs within {max(spread):.2f} s of the first "
                 "(the clock's zero)")  # fmt: skip
    if rss:
        text += f"; workers' resident memory together: up to {max(rss):.0f} MB"
    return text
