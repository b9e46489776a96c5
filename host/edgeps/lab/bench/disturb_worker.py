"""A real `edgeps worker` beside the competitor: its steps in and out of bursts.

`edgeps bench disturb --real-worker` runs serve (ASP) and two CPython
workers on a private mosquitto, with the settings of `edgeps bench paper`
(LeNet-5 on MNIST, batch 256, SGD lr 0.05), and disturbs w0 with
``edgeps.lab.disturb`` on its core once both are training; w1, pinned to
another core, is the twin. A passive broker client times each worker's
pushes (a step: compute, then the round trip to serve), and /proc gives the
disturbed worker's CPU time. A step's compute takes 1 / (1 - share) as long
inside a burst; the round trip does not, so the share predicts a step ratio
of (c / (1 - share) + T - c) / T, with T a step between bursts and c the CPU
it used. Ratios are taken inside one run, where the machine's load moves
least.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

from edgeps.lab import disturb
from edgeps.lab.bench.procs import edgeps
from edgeps.workloads.bursts import Bursts

EDGE = 0.05  # seconds: a step this close to a burst's edge is in neither set


class PushClock:
    """A passive client: when each worker's push (its first chunk) arrived."""

    def __init__(self, url: str, job: str) -> None:
        import paho.mqtt.client as mqtt
        from edgeps_worker import wire_host as wire

        self.wire = wire
        self.lock = threading.Lock()
        self.first: dict[tuple[str, int, int], float] = {}
        host, port = url.removeprefix("mqtt://").rsplit(":", 1)
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2, protocol=mqtt.MQTTv311
        )
        self.client.on_message = self._on_message
        self.client.connect(host, int(port))
        self.client.subscribe(f"edgeps/{job}/#", qos=0)
        self.client.loop_start()

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        now = time.monotonic()
        try:
            msg = self.wire.decode(bytes(message.payload))
        except self.wire.WireError:
            return
        if msg.type == self.wire.UPDATE:
            with self.lock:
                self.first.setdefault((msg.wid, msg.session, msg.seq), now)

    def times(self, wid: str) -> list[float]:
        """The monotonic times of ``wid``'s pushes, in order."""
        with self.lock:
            return sorted(t for (w, _, _), t in self.first.items() if w == wid)

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def cpu_seconds(pid: int) -> float:
    """CPU seconds every thread of ``pid`` has run (schedstat, ns resolution)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with (
            contextlib.suppress(OSError),
            open(f"/proc/{pid}/task/{tid}/schedstat") as f,
        ):
            total += int(f.read().split()[0])
    return total / 1e9


class CpuSampler:
    """Samples ``cpu_seconds(pid)`` every ``every`` s in a thread, as (time
    from ``origin``, CPU s), until ``stop()``; a process gone ends it."""

    def __init__(self, pid: int, origin: float, every: float = 0.1) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(pid, origin, every), daemon=True
        )
        self._thread.start()

    def _run(self, pid: int, origin: float, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.samples.append((time.monotonic() - origin, cpu_seconds(pid)))
            except (OSError, ValueError):
                return

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        self._thread.join(5.0)
        return self.samples


def split_steps(
    times: list[float], schedule: Bursts, edge: float = EDGE
) -> tuple[list[float], list[float]]:
    """Intervals between consecutive pushes (times from the schedule's 0):
    those wholly inside a burst, and those wholly between bursts."""
    inside, between = [], []
    for a, b in zip(times, times[1:], strict=False):
        busy = schedule.overlap(a - edge, b + edge)
        if busy >= b - a + 2 * edge - 1e-9:
            inside.append(b - a)
        elif busy == 0:
            between.append(b - a)
    return inside, between


def split_cpu(
    samples: list[tuple[float, float]], schedule: Bursts, edge: float = EDGE
) -> tuple[float, float]:
    """CPU seconds per wall second in bursts and between, from (time, CPU s)."""
    acc = {True: [0.0, 0.0], False: [0.0, 0.0]}
    for (t0, c0), (t1, c1) in zip(samples, samples[1:], strict=False):
        busy = schedule.overlap(t0 - edge, t1 + edge)
        if busy >= t1 - t0 + 2 * edge - 1e-9 or busy == 0:
            acc[busy > 0][0] += c1 - c0
            acc[busy > 0][1] += t1 - t0
    rate = {k: (c / t if t else float("nan")) for k, (c, t) in acc.items()}
    return rate[True], rate[False]


def predicted_ratio(step: float, cpu: float, share: float) -> float:
    """A step of ``step`` s using ``cpu`` s of compute, in a burst over out."""
    cpu = min(cpu, step)
    return (cpu / (1.0 - share) + step - cpu) / step


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def summarise(
    pushes: dict[str, list[float]],
    cpu: list[tuple[float, float]],
    schedule: Bursts,
) -> dict[str, float]:
    """The disturbed w0's steps and CPU in and out of bursts, and w1's steps."""
    inside, between = split_steps(pushes["w0"], schedule)
    cpu_in, cpu_out = split_cpu(cpu, schedule)
    step_in, step_out = _mean(inside), _mean(between)
    twin_in, twin_out = (_mean(s) for s in split_steps(pushes["w1"], schedule))
    return {
        "steps_in": float(len(inside)),
        "steps_out": float(len(between)),
        "step_in_ms": step_in * 1e3,
        "step_out_ms": step_out * 1e3,
        "ratio": step_in / step_out,
        "cpu_step_ms": cpu_out * step_out * 1e3,
        "pred_ratio": predicted_ratio(step_out, cpu_out * step_out, schedule.share),
        "cpu_in": cpu_in,
        "cpu_out": cpu_out,
        "twin_ratio": twin_in / twin_out,
    }


def measure(
    share: float = 0.8,
    *,
    burst: float = 2.0,
    period: float = 6.0,
    seconds: float = 30.0,
    batch: int = 256,
    model: str = "lenet5",
    dataset: str = "mnist",
    isolate: bool = True,
    mode: str = "auto",
    seed: int = 0,
) -> dict[str, Any]:
    """One run: serve, w0 disturbed for ``seconds`` s, w1 its twin."""
    from edgeps.transport.broker import start_mosquitto

    cores = sorted(os.sched_getaffinity(0))
    schedule = Bursts.seeded(burst, period, share, seed)
    job = "disturbed"
    procs: list[subprocess.Popen[bytes]] = []
    handle = clock = None
    with start_mosquitto() as broker:
        try:
            clock = PushClock(broker.url, job)
            procs.append(subprocess.Popen(edgeps(
                "serve", "--broker", broker.url, "--job", job, "--policy", "asp",
                "--dataset", dataset, "--model", model, "--lr", "0.05",
                "--optimizer", "sgd", "--max-time", str(seconds + 60.0),
                "--target-accuracy", "0.9999", "--quiet", "--seed", str(seed),
            ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
            for i in range(2):
                procs.append(subprocess.Popen(edgeps(
                    "worker", "--broker", broker.url, "--job", job, "--id", f"w{i}",
                    "--emulated", f"{dataset}:{i}/2", "--batch", str(batch),
                    "--seed", str(seed), "--log-level", "warning",
                ), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))  # fmt: skip
            w0, w1 = procs[1].pid, procs[2].pid
            with contextlib.suppress(OSError):
                os.sched_setaffinity(w1, {cores[-1]})
            # both training (a few pushes each) before the competitor starts
            deadline = time.monotonic() + 120.0
            while min(len(clock.times("w0")), len(clock.times("w1"))) < 3:
                if time.monotonic() > deadline or any(
                    p.poll() is not None for p in procs
                ):
                    raise RuntimeError("the workers did not start training")
                time.sleep(0.1)
            handle = disturb.start(
                w0, core=cores[0], schedule=schedule, limit=seconds + 30.0,
                mode=mode, isolate=isolate,
            )  # fmt: skip
            samples = []
            end = handle.origin + seconds
            while time.monotonic() < end:
                samples.append((time.monotonic() - handle.origin, cpu_seconds(w0)))
                time.sleep(0.05)
            load = os.getloadavg()[0]
        finally:
            if handle is not None:
                handle.stop()
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
            if clock is not None:
                clock.close()
    origin = handle.origin
    pushes = {
        w: [t - origin for t in clock.times(w) if t >= origin] for w in ("w0", "w1")
    }
    got: dict[str, Any] = summarise(pushes, samples, schedule)
    got.update(
        share=share, mode=handle.mode, isolated=isolate, load=load,
        model=model, batch=batch, schedule=schedule.describe(),
    )  # fmt: skip
    return got


def run_real(args: Any) -> int:
    """`edgeps bench disturb --real-worker`: one run per share, a table or JSON."""
    import json

    from edgeps.observe.table import table

    try:
        shares = [float(s) for s in str(args.shares).split(",") if s.strip()]
        Bursts(args.burst, args.period, max(shares, default=0.0))
        rows = [
            measure(
                s,
                burst=args.burst,
                period=args.period,
                seconds=args.seconds,
                batch=args.batch or 256,
                model=args.model or "lenet5",
                isolate=args.isolate,
                mode=args.mode,
                seed=args.seed,
            )  # fmt: skip
            for s in shares
        ]
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"edgeps bench disturb: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows))
        return 0
    header = [
        "share", "mode", "steps", "in_ms", "out_ms", "ratio", "pred_ratio",
        "cpu_step_ms", "cpu_in", "cpu_out", "twin_ratio", "load",
    ]  # fmt: skip
    cells = [
        [
            f"{r['share']:g}",
            r["mode"] + ("+isolated" if r["isolated"] else ""),
            f"{r['steps_in']:.0f}/{r['steps_out']:.0f}",
            f"{r['step_in_ms']:.0f}",
            f"{r['step_out_ms']:.0f}",
            f"{r['ratio']:.2f}",
            f"{r['pred_ratio']:.2f}",
            f"{r['cpu_step_ms']:.1f}",
            f"{r['cpu_in']:.2f}",
            f"{r['cpu_out']:.2f}",
            f"{r['twin_ratio']:.2f}",
            f"{r['load']:.1f}",
        ]  # fmt: skip
        for r in rows
    ]
    r0 = rows[0]
    print(
        f"edgeps worker w0 ({r0['model']}, batch {r0['batch']}, serve ASP, "
        f"mosquitto) disturbed {args.seconds:g} s, bursts of {args.burst:g} s every "
        f"{args.period:g} s; w1 the twin on another core; a step = push to push"
    )
    print(table(header, cells))
    return 0
