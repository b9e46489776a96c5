"""A real CPU competitor: burner processes on a worker's core, on a burst schedule."""

from __future__ import annotations

import bisect
import json
import os
import subprocess
import sys
import time

import pytest
from edgeps.lab import disturb
from edgeps.lab.cpusched import realtime_allowed
from edgeps.workloads.bursts import Bursts

# a busy measurement loop on one core: the end time of each equal chunk of work
LOOP = """
import json, os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
end = time.monotonic() + float(sys.argv[2])
out = []
while time.monotonic() < end:
    x = 0
    for _ in range(20000):
        x += 1
    out.append(time.monotonic())
print(json.dumps(out))
"""


def test_the_share_is_made_of_burners_and_nice_levels() -> None:
    assert disturb.plan_burners(0.5) == (1, 0, 0.5)
    assert disturb.plan_burners(0.75) == (3, 0, 0.75)
    assert disturb.plan_burners(0.8) == (4, 0, 0.8)
    k, nice, got = disturb.plan_burners(0.25)
    assert (k, nice) == (1, 5) and got == pytest.approx(0.25, abs=0.01)
    for share in (0.1, 0.3, 0.6, 0.9):
        assert disturb.plan_burners(share)[2] == pytest.approx(share, abs=0.02)
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError, match="share"):
            disturb.plan_burners(bad)


def test_start_needs_a_target_and_a_sane_limit() -> None:
    with pytest.raises(ValueError, match="pid or a core"):
        disturb.start(burst=1.0, period=2.0, share=0.5)
    with pytest.raises(ValueError, match="limit"):
        disturb.start(core=0, burst=1.0, period=2.0, share=0.5, limit=0.0)
    with pytest.raises(ValueError, match="core"):
        disturb.start(core=10_000, burst=1.0, period=2.0, share=0.5)
    with pytest.raises(ValueError, match="or a schedule"):
        disturb.start(core=0, burst=1.0, share=0.5)
    with pytest.raises(ValueError, match="mode"):
        disturb.start(core=0, burst=1.0, period=2.0, share=0.5, mode="nice")
    with pytest.raises(ValueError, match="isolate"):
        disturb.start(core=0, burst=1.0, period=2.0, share=0.5, isolate=True)
    with pytest.raises(ValueError, match="isolate"):
        disturb.start(
            os.getpid(), burst=1.0, period=2.0, share=0.5, mode="fair", isolate=True
        )


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fair", "realtime"])
def test_a_busy_loop_slows_during_bursts_and_the_burners_idle_between(
    mode: str,
) -> None:
    if mode == "realtime" and not realtime_allowed():
        pytest.skip("a real-time competitor needs root or CAP_SYS_NICE")
    # Prepare: the loop runs alone for a second, then next to the burners
    # (real-time: one burner, the loop isolated on its core)
    core = min(os.sched_getaffinity(0))
    loop = subprocess.Popen(
        [sys.executable, "-c", LOOP, str(core), "7.0"], stdout=subprocess.PIPE
    )
    try:
        time.sleep(1.0)
        schedule = Bursts(burst=1.0, period=2.0, share=0.75, phase=0.5)
        # Execute
        handle = disturb.start(
            loop.pid, core=core, schedule=schedule, limit=30.0, mode=mode,
            isolate=mode == "realtime",
        )  # fmt: skip
        assert handle.mode == mode and handle.effective_share == 0.75
        assert len(handle.pids) == (3 if mode == "fair" else 1)
        assert os.sched_getaffinity(loop.pid) == {core}
        out, _ = loop.communicate(timeout=60)
        burned = sum(_cpu_seconds(pid) for pid in handle.alive())
        elapsed = time.monotonic() - handle.origin
        pids = handle.pids
        handle.stop()
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait()
    # Assert: work done per second inside the bursts against between them,
    # each window trimmed at its edges (the machine may be busy: ratios only)
    ends = [t - handle.origin for t in json.loads(out)]

    def done(a: float, b: float) -> tuple[int, float]:
        return bisect.bisect(ends, b) - bisect.bisect(ends, a), b - a

    loud = [done(a + 0.05, b - 0.05) for a, b in schedule.intervals(0.0, ends[-1])]
    quiet = [
        done(b + 0.05, b + schedule.period - schedule.burst - 0.05)
        for _, b in schedule.intervals(0.0, ends[-1] - 1.0)
    ]
    assert len(loud) >= 3 and len(quiet) >= 2
    rate_loud = sum(n for n, _ in loud) / sum(t for _, t in loud)
    rate_quiet = sum(n for n, _ in quiet) / sum(t for _, t in quiet)
    busy = schedule.overlap(0.0, elapsed)
    # the burners share one core, and burn only inside bursts
    assert burned <= busy + 0.2, burned
    print(mode, "loud/quiet", rate_loud / rate_quiet, "burned/busy", burned / busy)
    if mode == "fair":
        # the burners' fair share shrinks with other sessions' load (they
        # share this session's weight): a margin only
        assert rate_loud < 0.75 * rate_quiet, (rate_loud, rate_quiet)
        assert burned > 0.0, burned
    else:
        # real time: the burner takes its share of the core, whatever else
        # runs, and the isolated loop the rest (the share predicts 0.25)
        assert 0.85 * 0.75 * busy < burned < 1.05 * 0.75 * busy, (burned, busy)
        assert rate_loud < 0.4 * rate_quiet, (rate_loud, rate_quiet)
    assert all(_gone(pid) for pid in pids)


@pytest.mark.slow
def test_burners_end_by_themselves_at_their_limit_and_stop_leaves_none() -> None:
    core = min(os.sched_getaffinity(0))
    handle = disturb.start(core=core, burst=0.2, period=0.4, share=0.5, limit=1.0)
    pids = handle.pids
    assert handle.alive() == pids
    deadline = time.monotonic() + 15.0
    while handle.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert handle.alive() == []
    handle.stop()
    assert all(_gone(pid) for pid in pids)
    with disturb.start(core=core, burst=0.2, period=0.4, share=0.8, mode="fair") as h:
        more = h.pids
        assert len(h.alive()) == 4
    assert all(_gone(pid) for pid in more)
    if realtime_allowed():
        with disturb.start(core=core, burst=0.2, period=0.4, share=0.8) as h:
            more = h.pids
            assert h.mode == "realtime" and len(h.alive()) == 1
            assert os.sched_getscheduler(more[0]) == os.SCHED_FIFO
        assert all(_gone(pid) for pid in more)


def test_the_command_refuses_bad_input_with_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert disturb.main(["--core", "0", "--share", "1.5", "--seconds", "1"]) == 2
    assert capsys.readouterr().err.startswith("disturb: ")
    assert disturb.main(["--pid", str(2**22 + 12345), "--seconds", "1"]) == 2
    with pytest.raises(SystemExit):
        disturb.main(["--core", "0", "--seconds", "9999"])


@pytest.mark.slow
def test_the_command_disturbs_a_worker_for_its_seconds_and_ends_clean() -> None:
    spin = (
        "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass"
    )
    loop = subprocess.Popen([sys.executable, "-c", spin])
    try:
        cmd = subprocess.run(
            [sys.executable, "-m", "edgeps.lab.disturb", "--pid", str(loop.pid),
             "--burst", "0.3", "--period", "0.6", "--share", "0.5",
             "--seconds", "1.5", "--mode", "fair"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert cmd.returncode == 0, cmd.stderr
        assert "1 fair burner(s)" in cmd.stdout and "share 0.500" in cmd.stdout
        # the worker has its old affinity back
        assert os.sched_getaffinity(loop.pid) == os.sched_getaffinity(0)
        if realtime_allowed():
            cmd = subprocess.run(
                [sys.executable, "-m", "edgeps.lab.disturb", "--pid",
                 str(loop.pid), "--share", "0.5", "--seconds", "1", "--isolate"],
                capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert cmd.returncode == 0, cmd.stderr
            assert "1 realtime burner(s)" in cmd.stdout
            # and its fair scheduling: isolation ends with the competitor
            assert os.sched_getscheduler(loop.pid) == os.SCHED_OTHER
            assert os.sched_getaffinity(loop.pid) == os.sched_getaffinity(0)
    finally:
        loop.kill()
        loop.wait()
