"""`edgeps plan --calibrate`: this machine's per-update costs, stored as JSON.

Short measurements: the PS core alone (``bench core``'s ``push_times``, ASP,
50 workers); on a private mosquitto the raw QoS 1 echo (``bench
throughput``'s ``measure_echo``) with mosquitto's own CPU read from /proc,
and the real coordinator applying and releasing bursts of updates
(``measure_ps``: this process's CPU per update) at the model's size and at a
larger one, which splits the host cost into a fixed and a per-parameter
part; then real jobs (``edgeps.lab.plan.job``: serve + 60, 250 and 1,000
loop-emulated sensors at the planned rate per sensor, 12 s windows), whose
(load, cores) points are the load curves the plan follows
(``edgeps.lab.plan.curve``). Bursts are cheaper per message than a running job,
where each update arrives alone among heartbeats, ticks and metrics, and a
job's cost per update depends on how its messages bunch (host/BENCHMARKS.md,
"Capacity planner against measurement"). So the jobs run at the rate being
planned, at several loads, and the bursts set only the per-parameter slope.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from edgeps.lab.plan.capacity import BOARD_CHUNK, Calibration
from edgeps.lab.plan.costs import beats_per_s


def default_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "edgeps" / "plan-calibration.json"


def load(path: Path) -> Calibration | None:
    """The stored calibration, or None if there is none (or it is unreadable)."""
    try:
        return Calibration.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def save(cal: Calibration, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(cal.to_dict(), indent=2) + "\n")
    tmp.replace(path)


def cpu_seconds(pid: int) -> float | None:
    """CPU time of a process, all its threads, from /proc (None where there is
    none): each thread's schedstat counts nanoseconds (``/proc/PID/schedstat``
    alone is the main thread's: serve's MQTT network thread is another), stat
    the whole process in clock ticks (10 ms)."""
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
        return sum(int((t / "schedstat").read_text().split()[0]) for t in tasks) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(fixed, slope) of cost = fixed + slope * n, least squares, both >= 0."""
    if len(points) == 1:
        return points[0][1], 0.0
    ns = [float(n) for n, _ in points]
    cs = [c for _, c in points]
    mean_n, mean_c = statistics.fmean(ns), statistics.fmean(cs)
    var = sum((n - mean_n) ** 2 for n in ns)
    slope = sum((n - mean_n) * (c - mean_c) for n, c in zip(ns, cs, strict=True))
    slope = max(0.0, slope / var) if var > 0 else 0.0
    return max(0.0, mean_c - slope * mean_n), slope


JOB_SENSORS = (60, 250, 1000, 2000)  # loads a factor of 2-4 apart, up to the
# box: serve's cost per update keeps falling with load past 1,000 sensors, so
# a curve that stops there over-predicts larger jobs
JOB_WINDOW = 12.0  # seconds each job is read over, after its ramp


def calibrate(
    n_params: int,
    messages: int = 2000,
    job_sensors: tuple[int, ...] = JOB_SENSORS,
    rate: float = 1.0,
) -> Calibration:
    """Measure the core, mosquitto and the coordinator on this machine; jobs
    of ``job_sensors`` sensors at ``rate`` updates/s each (none: bursts only;
    two or more: the load curves)."""
    from edgeps.lab.bench.core import push_times
    from edgeps.lab.bench.throughput import measure_echo, measure_ps
    from edgeps.lab.bench.throughput_feed import update_payloads
    from edgeps.transport.broker import start_mosquitto

    core = 1e6 * statistics.median(push_times("asp", 50, n_params, 2000, 10.0))
    sizes = sorted({n_params, max(4 * n_params, 16_384)})
    host: list[tuple[float, float]] = []
    broker_us: list[float] = []
    with start_mosquitto() as broker:
        pid = broker.proc.pid if broker.proc is not None else None
        for n in sizes:
            # in the board's chunks, as boards send them
            packets = messages * len(update_payloads(n, 1, BOARD_CHUNK)[0])
            before = None if pid is None else cpu_seconds(pid)
            echo = measure_echo(broker.host, broker.port, n, messages, BOARD_CHUNK)
            after = None if pid is None else cpu_seconds(pid)
            if before is not None and after is not None and after > before:
                broker_us.append(1e6 * (after - before) / packets)
            elif echo.rate > 0:
                broker_us.append(1e6 * messages / packets / echo.rate)  # a bound
            ps = measure_ps(broker.host, broker.port, n, messages, BOARD_CHUNK)
            host.append((n, ps.cpu_us))
    fixed, per_param = fit(host)
    cal = Calibration(
        host_fixed_us=fixed,
        host_per_param_us=per_param,
        broker_us_per_msg=broker_us[0] if broker_us else 0.0,
        core_us_per_update=core,
        n_params=tuple(sizes),
    )
    how = "bursts"
    if job_sensors:
        cal = _from_jobs(cal, job_sensors, rate)
        how = (
            f"jobs of {'/'.join(str(n) for n in job_sensors)} sensors at "
            f"{rate:g} updates/s each, and bursts"
        )
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    source = f"calibrated {stamp} on {platform.node()} ({os.cpu_count()} cpus)"
    return replace(cal, source=f"{source} from {how}")


JOB_MODEL = "softmax:33x6"  # the emulator's default model on the sensors set


def job_points(
    jobs: list[dict[str, Any]], heartbeat_s: float
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(updates/s, serve cores) and (publishes/s in, mosquitto cores) of jobs.

    Each update is one publish in to the broker and its release another (one
    packet each at the jobs' model size), plus every sensor's heartbeats
    (``beats_per_s``: none while a sensor pushes once a heartbeat period).
    """
    host: list[tuple[float, float]] = []
    broker: list[tuple[float, float]] = []
    for job in jobs:
        rate = job["updates_per_s"]
        if rate <= 0 or job["serve_cores"] is None:
            raise RuntimeError(f"a calibration job applied nothing: {job}")
        host.append((rate, job["serve_cores"]))
        if job["broker_cores"] is not None:
            n = job["sensors"]
            msgs = 2 * rate + n * beats_per_s(rate / n, heartbeat_s)
            broker.append((msgs, job["broker_cores"]))
    return host, broker


def _from_jobs(cal: Calibration, sensors: tuple[int, ...], rate: float) -> Calibration:
    """Host and broker load curves from real jobs (and the old line's terms)."""
    from edgeps import kernels
    from edgeps.lab.plan.capacity import HEARTBEAT_S
    from edgeps.lab.plan.job import measure_job

    n = kernels.ModelSpec.parse(JOB_MODEL).n_params
    jobs = [
        measure_job(count, window=JOB_WINDOW, model=JOB_MODEL, rate=rate)
        for count in sensors
    ]
    host, broker = job_points(jobs, HEARTBEAT_S)
    host_idle, host_per = _split(host)
    out = replace(
        cal,
        host_fixed_us=max(0.0, 1e6 * host_per - cal.host_per_param_us * n),
        host_idle_cores=host_idle,
        host_loads=tuple(host),
        job_n_params=n,
        job_rate=rate,
    )
    if broker:
        broker_idle, broker_per = _split(broker)
        out = replace(
            out,
            broker_us_per_msg=1e6 * broker_per,
            broker_idle_cores=broker_idle,
            broker_loads=tuple(broker),
        )
    return out


def _split(points: list[tuple[float, float]]) -> tuple[float, float]:
    """(cores at no load, cores per unit) from (load, cores) points."""
    if len(points) == 1 or len({x for x, _ in points}) == 1:
        return 0.0, statistics.fmean(c / x for x, c in points if x > 0)
    fixed, slope = fit(points)
    if slope <= 0:
        return 0.0, statistics.fmean(c / x for x, c in points if x > 0)
    return fixed, slope
