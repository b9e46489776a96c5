"""A real CPU competitor for a worker: burner processes on its core, in bursts.

The disturbed node of Zhang et al. (2017) runs tasks unrelated to the
training. ``start(pid=..., burst=2, period=6, share=0.8, seed=0)`` pins the
worker ``pid`` to one core and starts burners pinned to the same core that
busy-loop during each burst of ``edgeps.workloads.bursts.Bursts`` (the same
schedule, phase drawn from the same seed, as the ``disturbed`` scenario's
profile) and sleep otherwise. Two ways to take ``share`` of the core:

- ``realtime`` (the default where the user may: root or CAP_SYS_NICE): one
  SCHED_FIFO burner, a priority above the worker's, busy ``share`` x 10 ms
  of every 10 ms of a burst and asleep the rest. Real-time tasks run before
  every fair one, so the core's fair tasks (the worker among them) get
  exactly ``1 - share`` of the time they had, whatever else the machine runs.
- ``fair``: k burners at a nice level n above the worker's, share = k w(n) /
  (k w(n) + w(0)) with w the kernel's nice weights. Exact only on an
  otherwise idle machine: the burners join the scheduling group (the
  session's autogroup) of the process that starts them, which is usually
  the whole experiment's, so under other sessions' load the fair scheduler
  splits that group's weight between cores by its runnable tasks, and a
  burst takes CPU from every process of the experiment, on both cores, about
  as much as from the worker (host/BENCHMARKS.md).

``isolate=True`` (real-time only) also runs the worker's threads SCHED_FIFO
at priority 1 until ``stop()``: its core is its own but for the competitor,
as the profile assumes, which a measurement wants and an experiment with
equal workers does not. The handle says the share made
(``effective_share``) and how (``mode``). Every burner exits by itself at
its deadline (``limit`` seconds) or when this process dies; ``stop()`` kills
them by pid and gives the worker its old affinity and policy back.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from edgeps.lab.cpusched import pin, realtime_allowed, rt_priority, set_realtime
from edgeps.workloads.bursts import Bursts

# the fair scheduler's weight of each nice level, -20..19 (kernel/sched/core.c)
NICE_WEIGHTS = (
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
    9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
    110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
)  # fmt: skip
MAX_BURNERS = 8
MODES = ("auto", "realtime", "fair")
ISOLATED_PRIORITY = 1  # SCHED_FIFO priority of an isolated worker
LIMIT = 600.0  # seconds a competitor may run at most, whatever stop() does

SLOT = 0.01  # seconds of one real-time duty cycle: busy share x SLOT, then asleep

# one burner: busy during bursts, asleep between, gone at its deadline or
# when its parent is; no imports beyond the standard library. Fair mode
# (duty 0): busy the whole burst, ``level`` nice levels up. Real-time mode
# (duty d): SCHED_FIFO at priority ``level``, asleep (1 - d) x SLOT at a time
# and busy between until its CPU time is d of the burst's time, so the core's
# other tasks get exactly 1 - d of the time they had
_BURNER = """
import os, sys, time
origin, burst, period, phase, deadline, parent, duty, slot = map(float, sys.argv[1:9])
level, core = int(sys.argv[9]), int(sys.argv[10])
os.sched_setaffinity(0, {core})
if duty:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(level))
elif level:
    os.nice(level)
now = time.monotonic
while True:
    t = now()
    if t >= deadline or os.getppid() != int(parent):
        break
    u = (t - origin - phase) % period
    if u < burst:
        start = t - u
        end = min(start + burst, deadline)
        x = 0
        if not duty:
            while now() < end:
                for _ in range(2000):
                    x += 1
            continue
        # busy until its CPU time in the burst is duty of the burst's time so
        # far (made up after a late wake-up or a preemption), then asleep for
        # 1 - duty of a slot
        cpu0 = time.thread_time()
        while True:
            c = now()
            if c >= end or os.getppid() != int(parent):
                break
            while time.thread_time() - cpu0 < duty * (now() - t) and now() < end:
                x += 1
            rest = min((1.0 - duty) * slot, end - now())
            if rest > 0:
                time.sleep(rest)
    else:
        time.sleep(min(period - u, deadline - t, 0.5))
"""


def plan_burners(
    share: float, max_burners: int = MAX_BURNERS, tolerance: float = 0.01
) -> tuple[int, int, float]:
    """(burners, nice above the worker, share they take) for ``share``.

    The fewest burners (then the lowest nice level) within ``tolerance`` of
    it; if none is, the closest.
    """
    if not 0.0 < share < 1.0:
        raise ValueError(f"a real competitor needs 0 < share < 1, got {share!r}")
    base = NICE_WEIGHTS[20]
    plans = []
    for k in range(1, max_burners + 1):
        for n in range(0, 20):
            w = k * NICE_WEIGHTS[20 + n]
            plans.append((k, n, w / (w + base)))
    close = [p for p in plans if abs(p[2] - share) <= tolerance]
    if close:
        return min(close)
    return min(plans, key=lambda p: (abs(p[2] - share), p[0], p[1]))


@dataclass
class Disturbance:
    """A running competitor: its schedule, core, burner pids and clock origin.

    ``origin`` is the ``time.monotonic()`` at which the schedule's time 0 is,
    so ``schedule.in_burst(time.monotonic() - origin)`` says whether it runs.
    """

    schedule: Bursts
    core: int
    pid: int | None
    origin: float
    deadline: float
    nice: int
    effective_share: float
    mode: str = "fair"
    isolated: bool = False
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _affinity: set[int] | None = None

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def alive(self) -> list[int]:
        """The burner pids still running."""
        return [p.pid for p in self.procs if p.poll() is None]

    def stop(self, timeout: float = 5.0) -> None:
        """Kill every burner by pid, reap it, and give the worker its affinity
        (and, if isolated, its fair scheduling) back."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGKILL)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=timeout)
        # the worker may be gone: nothing to give back then
        if self.pid is not None and self.isolated:
            with contextlib.suppress(OSError):
                set_realtime(self.pid, 0)
            self.isolated = False
        if self.pid is not None and self._affinity is not None:
            with contextlib.suppress(OSError):
                pin(self.pid, self._affinity)
            self._affinity = None

    def __enter__(self) -> Disturbance:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _nice_of(pid: int | None) -> int:
    return os.getpriority(os.PRIO_PROCESS, pid or 0)


def start(
    pid: int | None = None,
    *,
    core: int | None = None,
    burst: float | None = None,
    period: float | None = None,
    share: float | None = None,
    seed: int = 0,
    schedule: Bursts | None = None,
    limit: float = LIMIT,
    origin: float | None = None,
    mode: str = "auto",
    isolate: bool = False,
) -> Disturbance:
    """Start a competitor on ``pid``'s core (or ``core``); returns its handle.

    Parameters
    ----------
    pid: the worker to disturb; it is pinned to ``core`` (default: the lowest
        core it may run on) until ``stop()``. None: only ``core`` is used.
    core: the CPU both run on.
    burst, period, share, seed: the schedule (``Bursts.seeded``), unless
        ``schedule`` gives it whole. To disturb a real worker as a simulated
        run of the ``disturbed`` scenario does, pass that worker's
        ``make_scenario(name, n, seed).profiles[wid].bursts`` and, as
        ``origin``, the job's start.
    limit: seconds after which every burner exits by itself.
    origin: the ``time.monotonic()`` of the schedule's time 0 (default: now).
    mode: "realtime" (one SCHED_FIFO burner on a duty cycle), "fair" (k
        burners at a nice level) or "auto" (realtime where allowed).
    isolate: the worker's threads SCHED_FIFO at priority 1 until ``stop()``
        (real-time only): between bursts it has its core.
    """
    if pid is None and core is None:
        raise ValueError("start() needs the worker's pid or a core")
    if not limit > 0:
        raise ValueError(f"limit must be > 0 seconds, got {limit!r}")
    if schedule is not None:
        sched = schedule
    elif burst is None or period is None or share is None:
        raise ValueError("start() needs burst, period and share, or a schedule")
    else:
        sched = Bursts.seeded(burst, period, share, seed)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    burners, nice, got = plan_burners(sched.share)
    allowed = os.sched_getaffinity(pid or 0)
    if core is None:
        core = min(allowed)
    if core not in os.sched_getaffinity(0):
        raise ValueError(f"core {core} is not one this process may use")
    realtime = mode == "realtime" or (mode == "auto" and realtime_allowed())
    if realtime and not realtime_allowed():
        raise ValueError("a real-time competitor needs root or CAP_SYS_NICE")
    if isolate and (pid is None or not realtime):
        raise ValueError("isolate needs a worker pid and a real-time competitor")
    old = None
    if pid is not None:
        old = allowed
        pin(pid, {core})
    if isolate and pid is not None:
        try:
            set_realtime(pid, ISOLATED_PRIORITY)
        except OSError:
            with contextlib.suppress(OSError):
                set_realtime(pid, 0)
                pin(pid, allowed)
            raise
    if realtime:
        # one SCHED_FIFO burner, a priority above the worker's, takes the share
        # by its duty cycle
        burners, nice, duty, got = 1, 0, sched.share, sched.share
        delta = min(99, rt_priority(pid) + 1)
    else:
        # the burners' nice counts from the worker's own, and may only go up
        target = _nice_of(pid)
        delta = max(0, min(19, target + nice) - _nice_of(None))
        w = burners * NICE_WEIGHTS[20 + _nice_of(None) + delta]
        duty, got = 0.0, w / (w + NICE_WEIGHTS[20 + target])
    t0 = time.monotonic() if origin is None else origin
    deadline = time.monotonic() + limit
    handle = Disturbance(
        sched, core, pid, t0, deadline, nice, got,
        "realtime" if realtime else "fair", isolate, _affinity=old,
    )  # fmt: skip
    args = [
        repr(t0), repr(sched.burst), repr(sched.period), repr(sched.phase),
        repr(deadline), str(os.getpid()), repr(duty), repr(SLOT), str(delta),
        str(core),
    ]  # fmt: skip
    try:
        for _ in range(burners):
            proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _BURNER, *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            handle.procs.append(proc)
            os.sched_setaffinity(proc.pid, {core})
            if realtime:  # now, not once the burner's Python has started
                os.sched_setscheduler(proc.pid, os.SCHED_FIFO, os.sched_param(delta))
    except BaseException:
        handle.stop()
        raise
    return handle


def main(argv: list[str] | None = None) -> int:
    """``python -m edgeps.lab.disturb --pid PID``: disturb a running worker."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m edgeps.lab.disturb",
        description="Compete for a running worker's core in bursts, then stop.",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--pid", type=int, help="the worker to disturb (pinned)")
    target.add_argument("--core", type=int, help="a core to burn, no worker")
    parser.add_argument("--burst", type=float, default=2.0, help="seconds on")
    parser.add_argument("--period", type=float, default=6.0, help="seconds apart")
    parser.add_argument("--share", type=float, default=0.8, help="CPU share taken")
    parser.add_argument("--seed", type=int, default=0, help="draws the phase")
    parser.add_argument(
        "--mode", choices=MODES, default="auto", help="how the share is taken"
    )
    parser.add_argument(
        "--isolate", action="store_true", help="the worker real-time (its own core)"
    )
    parser.add_argument(
        "--seconds", type=float, default=60.0, help="how long (at most 600)"
    )
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= LIMIT:
        parser.error(f"--seconds must be in (0, {LIMIT:g}]")
    try:
        handle = start(
            args.pid, core=args.core, burst=args.burst, period=args.period,
            share=args.share, seed=args.seed, limit=args.seconds,
            mode=args.mode, isolate=args.isolate,
        )  # fmt: skip
    except (ValueError, TypeError, OSError) as exc:
        print(f"disturb: {exc}", file=sys.stderr)
        return 2
    s = handle.schedule
    print(
        f"{len(handle.pids)} {handle.mode} burner(s) on core {handle.core} "
        f"(share {handle.effective_share:.3f}): {s.describe()}, "
        f"first burst {s.phase:.2f} s from now, for {args.seconds:g} s",
        flush=True,
    )
    try:
        while handle.alive() and time.monotonic() < handle.deadline:
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        handle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
