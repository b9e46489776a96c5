"""A short real job, measured: serve + N emulated sensors on a private mosquitto.

``measure_job(n)`` starts mosquitto, `edgeps serve` (ASP, its metrics every
second, as `edgeps bench scale` runs it) and `edgeps emulate --workers n`
(with ``rate``: the loop emulator, each sensor computing ``1 / rate``
seconds per update, as `bench scale` does at 1/s), waits until updates flow, then
reads over a steady window the updates/s from serve's metrics and the CPU
of serve, mosquitto and the emulator from /proc. `edgeps plan --calibrate`
uses it for the costs of a running job (each update arrives alone, with
heartbeats, ticks and metrics around it, which a burst through the broker
does not show); host/BENCHMARKS.md compares the plan with it at other sizes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from edgeps.lab.plan.calibrate import cpu_seconds


def _updates(path: Path) -> tuple[float, int] | None:
    """(wall time, updates) of serve's last metrics record."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
            return float(rec["time"]), int(rec["updates"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def measure_job(
    n: int,
    *,
    window: float = 15.0,
    model: str = "softmax",
    rate: float | None = None,
    scenario: str = "homogeneous",
    policy: str = "asp",
    start_timeout: float = 90.0,
) -> dict[str, Any]:
    """Updates/s and the cores of serve, mosquitto and emulate, n sensors
    (``rate``: each at about that many updates/s, else the scenario's pace)."""
    from edgeps.transport.broker import start_mosquitto

    edgeps = [sys.executable, "-m", "edgeps"]
    total = start_timeout + window + 10
    pace: list[str] = []
    if rate is not None:
        procs = "1" if n <= 500 else "2"  # as `edgeps bench scale`
        pace = ["--engine", "loop", "--processes", procs,
                "--compute-time", f"{1.0 / rate:g}"]  # fmt: skip
    with TemporaryDirectory() as tmp, start_mosquitto(sensors=n + 8) as broker:
        metrics = Path(tmp) / "metrics.jsonl"
        serve = subprocess.Popen(
            [*edgeps, "serve", "--broker", broker.url, "--job", "plan",
             "--policy", policy, "--model", model, "--max-time", str(total),
             "--norm-guard", "0", "--quiet", "--metrics-out", str(metrics),
             "--metrics-interval", "1", "--log-level", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        emulate = subprocess.Popen(
            [*edgeps, "emulate", "--broker", broker.url, "--job", "plan",
             "--workers", str(n), "--scenario", scenario, "--max-time", str(total),
             *pace],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            pids = (serve.pid, broker.proc.pid if broker.proc else None, emulate.pid)
            # steady: updates have flowed for a few seconds (all joined by then)
            deadline = time.monotonic() + start_timeout
            first = None
            while time.monotonic() < deadline:
                time.sleep(0.5)
                got = _updates(metrics)
                if got and got[1] > 0:
                    first = first or time.monotonic()
                    if time.monotonic() - first > 5:
                        break
            else:
                raise RuntimeError(f"no steady updates from {n} sensors in time")
            w0, cpu0 = time.time(), [cpu_seconds(p) if p else None for p in pids]
            m0 = _updates(metrics)
            time.sleep(window)
            w1, cpu1 = time.time(), [cpu_seconds(p) if p else None for p in pids]
            m1 = _updates(metrics)
        finally:
            _stop(emulate)
            _stop(serve)
    (t0, u0), (t1, u1) = m0 or (0.0, 0), m1 or (0.0, 0)
    applied = (u1 - u0) / (t1 - t0) if t1 > t0 else 0.0
    span = w1 - w0

    def cores(i: int) -> float | None:
        a, b = cpu0[i], cpu1[i]
        return None if a is None or b is None else (b - a) / span

    return {
        "sensors": n,
        "model": model,
        "scenario": scenario,
        "rate": rate,
        "updates_per_s": applied,
        "serve_cores": cores(0),
        "broker_cores": cores(1),
        "emulate_cores": cores(2),
        "window_s": span,
    }
