"""One run of `edgeps bench scale`: a private mosquitto, serve and the emulator.

Each piece is its own process, so their CPU is read apart from /proc
(utime + stime, the emulator's child processes included). The broker gets
a config of the bench's own (`BROKER_CONF`): no limit on queued or
in-flight messages and connections, $SYS every second, no persistence.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgeps.lab.bench.procs import edgeps

BROKER_CONF = """listener {port} 127.0.0.1
allow_anonymous true
persistence false
set_tcp_nodelay true
max_connections -1
max_queued_messages 0
max_queued_bytes 0
max_inflight_messages 0
max_inflight_bytes 0
sys_interval 1
log_type error
log_type warning
"""
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds) of one process, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rindex(")") + 2 :].split()
    return int(rest[1]), (int(rest[11]) + int(rest[12])) / TICKS


def cpu_seconds(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                parents[int(entry)], cpu[int(entry)] = st
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += cpu.get(p, 0.0)
        todo.extend(c for c, pp in parents.items() if pp == p)
    return total


def thread_seconds(pid: int) -> dict[int, float]:
    """CPU seconds of each live thread of ``pid`` (/proc/PID/task), by thread id."""
    out: dict[int, float] = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                rest = text[text.rindex(")") + 2 :].split()
                out[int(tid)] = (int(rest[11]) + int(rest[12])) / TICKS
    return out


def split_threads(
    pid: int, before: dict[int, float], after: dict[int, float], dt: float
) -> dict[str, float]:
    """Cores used between two `thread_seconds`: the main thread (serve's
    coordinator, whose id is the pid) and all the others (its network thread)."""
    if dt <= 0:
        return {}
    used = {t: after[t] - before.get(t, 0.0) for t in after}
    main = used.pop(pid, 0.0)
    return {"main": round(main / dt, 3), "others": round(sum(used.values()) / dt, 3)}


def load_average() -> float | None:
    """The 1-minute load average (/proc/loadavg), None where there is none."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def box_busy_seconds() -> float:
    """CPU seconds all cores of this machine spent busy since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / TICKS


def _wait_port(port: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


@dataclass
class RunSpec:
    sensors: int
    policy: str
    duration: float  # seconds the sensors run (their ramp included)
    model: str | None = None  # None: the job's default model for the dataset
    lr: float | None = None  # None: the job's default step (edgeps.core.defaults)
    processes: int = 1  # emulator processes
    warmup: float = 5.0  # seconds after the ramp before CPU and rates are read
    # lognormal sigma of each sensor's 1 s iteration; None: the scenario's (0.05)
    jitter: float | None = 0.0
    pace: bool = False  # emulate --pace: a step's time counts from its arrival


@dataclass
class RunResult:
    sensors: int
    policy: str
    jitter: float | None = 0.0  # the sensors' compute_jitter (None: scenario's)
    pace: bool = False  # the emulator ran with --pace
    window_s: float = 0.0
    offered_per_s: float = 0.0
    applied_per_s: float = 0.0
    rejected: int = 0
    rejected_by_reason: dict[str, int] = field(default_factory=dict)
    serve_cpu: float = 0.0  # cores (1.0 = one core busy)
    emulator_cpu: float = 0.0
    broker_cpu: float = 0.0
    box_cpu: float = 0.0  # every process of the machine, others' included
    serve_threads: dict[str, float] = field(default_factory=dict)  # cores by thread
    load_avg: list[float | None] = field(default_factory=list)  # window start, end
    inbox_depth_p99: float | None = None
    latency_ms_p50: float | None = None
    latency_ms_p95: float | None = None
    broker_dropped: int | None = None
    broker_log_drops: int = 0
    emulator: dict[str, Any] = field(default_factory=dict)
    accuracy: float | None = None  # serve's final test accuracy: is it learning?
    state: str = ""  # serve's job state: learning, diverging, backed off
    error: str = ""


def _applied_between(metrics: Path, t1: float, t2: float) -> tuple[float, float]:
    """Applied updates and ingested pushes per second between wall times t1, t2."""
    rows = []
    with contextlib.suppress(OSError):
        for line in metrics.read_text().splitlines():
            with contextlib.suppress(ValueError):
                rows.append(json.loads(line))
    inside = [r for r in rows if t1 <= r.get("time", 0) <= t2]
    if len(inside) < 2:
        return 0.0, 0.0
    a, b = inside[0], inside[-1]
    dt = b["time"] - a["time"]
    pushes = b.get("inbound", {}).get("pushes", 0) - a.get("inbound", {}).get(
        "pushes", 0
    )
    return (b["updates"] - a["updates"]) / dt, pushes / dt


def one_run(spec: RunSpec) -> RunResult:
    """Start broker, serve and emulator; measure; stop all; return the row."""
    res = RunResult(spec.sensors, spec.policy, spec.jitter, spec.pace)
    port = free_port()
    url = f"mqtt://127.0.0.1:{port}"
    job = f"scale{spec.sensors}"
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="edgeps-scale-") as tmp:
        d = Path(tmp)
        (d / "broker.conf").write_text(BROKER_CONF.format(port=port))
        broker_log = (d / "broker.log").open("wb")
        try:
            broker = subprocess.Popen(
                ["mosquitto", "-c", str(d / "broker.conf")],
                stdout=broker_log,
                stderr=subprocess.STDOUT,
            )
            procs.append(broker)
            if not _wait_port(port, 10):
                res.error = "broker did not start"
                return res
            ramp = 0.002 * spec.sensors / spec.processes
            serve_time = spec.duration + 30.0
            serve = subprocess.Popen(
                edgeps(
                    "serve",
                    "--broker",
                    url,
                    "--job",
                    job,
                    "--policy",
                    spec.policy,
                    *(["--model", spec.model] if spec.model else []),
                    *(["--lr", repr(spec.lr)] if spec.lr is not None else []),
                    "--max-time",
                    str(serve_time),
                    "--json",
                    "--quiet",
                    "--metrics-out",
                    str(d / "metrics.jsonl"),
                    "--log-level",
                    "warning",
                ),  # fmt: skip
                stdout=subprocess.PIPE,
                stderr=(d / "serve.err").open("wb"),
            )
            procs.append(serve)
            time.sleep(2.0)  # serve publishes its retained MODEL
            emu = subprocess.Popen(
                edgeps(
                    "emulate",
                    "--broker",
                    url,
                    "--job",
                    job,
                    "--workers",
                    str(spec.sensors),
                    "--engine",
                    "loop",
                    "--processes",
                    str(spec.processes),
                    "--compute-time",
                    "1.0",
                    *jitter_args(spec.jitter),
                    *(["--pace"] if spec.pace else []),
                    "--max-time",
                    str(spec.duration),
                    "--json",
                    "--log-level",
                    "warning",
                ),  # fmt: skip
                stdout=subprocess.PIPE,
                stderr=(d / "emulate.err").open("wb"),
            )
            procs.append(emu)
            start = time.monotonic()
            t_first = start + min(spec.duration / 2, ramp + spec.warmup)
            t_last = start + spec.duration - 1.0
            time.sleep(max(0.0, t_first - time.monotonic()))
            box1, load1, th1 = (
                box_busy_seconds(),
                load_average(),
                thread_seconds(serve.pid),
            )
            wall1, c1 = time.time(), [cpu_seconds(p.pid) for p in (serve, emu, broker)]
            time.sleep(max(0.0, t_last - time.monotonic()))
            wall2, c2 = time.time(), [cpu_seconds(p.pid) for p in (serve, emu, broker)]
            dt = wall2 - wall1
            res.serve_threads = split_threads(
                serve.pid, th1, thread_seconds(serve.pid), dt
            )
            res.load_avg = [load1, load_average()]
            res.box_cpu = round((box_busy_seconds() - box1) / dt, 2)
            res.window_s = round(dt, 2)
            res.serve_cpu, res.emulator_cpu, res.broker_cpu = (
                round((b - a) / dt, 3) for a, b in zip(c1, c2, strict=True)
            )
            out, _ = emu.communicate(timeout=spec.duration + 60)
            emu_json = json.loads(out or b"{}")
            res.emulator = emu_json.get("cost", {})
            serve.send_signal(signal.SIGINT)
            sout, _ = serve.communicate(timeout=60)
            summary = json.loads(sout or b"{}")
            applied, pushed = _applied_between(d / "metrics.jsonl", wall1, wall2)
            res.applied_per_s = round(applied, 1)
            res.offered_per_s = round(
                _offered(emu_json, spec.duration - ramp / 2) or pushed, 1
            )
            _fill_from_summary(res, summary)
            broker.terminate()
            broker.wait(10)
            broker_log.close()
            log = (d / "broker.log").read_text(errors="replace")
            res.broker_log_drops = log.count("Outgoing messages are being dropped")
        except (subprocess.TimeoutExpired, ValueError, OSError) as exc:
            res.error = f"{type(exc).__name__}: {exc}"
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            broker_log.close()
    return res


def jitter_args(jitter: float | None) -> list[str]:
    """The emulator's flags for one jitter reading (None: the scenario's own)."""
    return [] if jitter is None else ["--compute-jitter", repr(float(jitter))]


def _offered(emu_json: dict[str, Any], active: float) -> float:
    pushes = sum(
        w.get("stats", {}).get("pushes", 0) for w in emu_json.get("workers", [])
    )
    return pushes / active if active > 0 else 0.0


def _fill_from_summary(res: RunResult, summary: dict[str, Any]) -> None:
    workers = summary.get("workers", {})
    res.rejected = sum(int(w.get("rejected", 0)) for w in workers.values()) + int(
        summary.get("unknown", {}).get("rejected", 0)
    )
    reasons: dict[str, int] = {}
    rows = [*workers.values(), summary.get("unknown", {})]
    for w in rows:
        for k, v in w.get("rejected_by_reason", {}).items():
            reasons[k] = reasons.get(k, 0) + int(v)
    res.rejected_by_reason = reasons
    inbound = summary.get("inbound", {})
    res.inbox_depth_p99 = inbound.get("inbox_depth_p99")
    res.latency_ms_p50 = inbound.get("push_to_release_ms_p50")
    res.latency_ms_p95 = inbound.get("push_to_release_ms_p95")
    res.broker_dropped = summary.get("broker", {}).get("publish_dropped")
    res.accuracy = summary.get("accuracy")
    res.state = str(summary.get("state", ""))
