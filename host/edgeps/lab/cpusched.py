"""Every thread of a process on given cores, or at a real-time priority.

An affinity or a scheduling policy set by pid binds only the process's main
thread, and a worker computes and talks to the broker in others too, so these
helpers walk ``/proc/<pid>/task``. A thread that ends meanwhile is skipped.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys


def threads(pid: int) -> list[int]:
    """The thread ids of ``pid`` (just ``pid`` if /proc cannot say)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return [pid]


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of process ``pid`` on ``cores``."""
    os.sched_setaffinity(pid, cores)
    for tid in threads(pid):
        with contextlib.suppress(OSError):  # a thread that has just ended
            os.sched_setaffinity(tid, cores)


def rt_priority(pid: int | None) -> int:
    """The highest real-time priority among ``pid``'s threads (0: none is)."""
    if pid is None:
        return 0
    best = 0
    for tid in threads(pid):
        with contextlib.suppress(OSError):
            best = max(best, os.sched_getparam(tid).sched_priority)
    return best


def set_realtime(pid: int, priority: int) -> None:
    """Every thread of ``pid`` SCHED_FIFO at ``priority``; 0: back to SCHED_OTHER."""
    policy = os.SCHED_FIFO if priority else os.SCHED_OTHER
    os.sched_setscheduler(pid, policy, os.sched_param(priority))
    for tid in threads(pid):
        with contextlib.suppress(OSError):
            os.sched_setscheduler(tid, policy, os.sched_param(priority))


@functools.cache
def realtime_allowed() -> bool:
    """Whether this user may run a SCHED_FIFO process (root, CAP_SYS_NICE or
    an RLIMIT_RTPRIO): tried in a throwaway child, never in this process."""
    if not hasattr(os, "SCHED_FIFO"):
        return False
    probe = "import os; os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(2))"
    try:
        done = subprocess.run(
            [sys.executable, "-S", "-c", probe],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
