"""`edgeps bench disturb`: a real worker's steps beside a real competitor, vs a profile.

A child process runs the CPython worker's trainer (``NativeTrainer.step`` on
the chosen model, on random data) in a loop pinned to one core and records
when each step started and ended: first alone (the baseline step time), then
with ``edgeps.lab.disturb`` burners on the same core in bursts. The simulator
and the emulator say a step of baseline length ``w`` started at ``t`` takes
``Bursts.stretch(t, w)``; this bench prints, per share, the measured
slowdown inside the bursts, between them, and over the whole disturbed span,
each beside that prediction, and the ratio measured / predicted of the span
(1.0: the profile is what a real competitor does). The profile assumes the
worker has its core to itself; on a busy machine the burners add to others'
load, so the bench also compares, within the disturbed span, a step in a
burst with one between bursts against what the share predicts on a core the
worker had only part of between them, and prints the load average.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from edgeps.lab import disturb
from edgeps.workloads.bursts import Bursts

LENET5 = "conv2d:1x28x28-c6k5p2-m2-c16k5-m2-d120-d84-10"
EDGE = 0.05  # seconds trimmed at each burst edge when sorting steps

# the worker: its trainer's steps on one core, (start, end, CPU seconds) of
# each, as JSON
_WORKER = """
import json, os, sys, time
import numpy as np
from edgeps.kernels import ModelSpec
from edgeps.pyworker.localdata import LocalData
from edgeps.pyworker.trainer import NativeTrainer
model, core, seconds, batch, seed = sys.argv[1], *map(float, sys.argv[2:6])
os.sched_setaffinity(0, {int(core)})
spec = ModelSpec.parse(model)
rng = np.random.default_rng(int(seed))
X = rng.standard_normal((max(256, int(batch)), spec.n_features)).astype(np.float32)
y = rng.integers(0, max(2, spec.n_classes), len(X)).astype(np.int32)
trainer = NativeTrainer(spec, LocalData(X, y, "bench"), int(batch), int(seed))
trainer.step()
print("ready", flush=True)
end = time.monotonic() + seconds
steps = []
while time.monotonic() < end:
    t0, c0 = time.monotonic(), time.process_time()
    trainer.step()
    steps.append((t0, time.monotonic(), time.process_time() - c0))
print(json.dumps(steps), flush=True)
"""


@dataclass
class Row:
    """One share's measurement: slowdowns measured and predicted by the profile."""

    share: float
    effective_share: float
    burners: int
    nice: int
    base_ms: float
    steps: int
    burst_x: float
    burst_pred_x: float
    between_x: float
    cpu_between: float
    rel_x: float
    rel_pred_x: float
    span_x: float
    span_pred_x: float
    ratio: float
    load: float
    mode: str = "fair"


def _mean(values: list[float]) -> float:
    # a mean, not a median: a step shorter than the scheduler's slice either
    # runs whole or waits a slice, so only the mean shows the share it got
    return statistics.fmean(values) if values else float("nan")


def summarise(
    steps: list[tuple[float, float, float]],
    origin: float,
    schedule: Bursts,
) -> dict[str, float]:
    """Slowdowns of the steps (start, end, CPU s) against the baseline (the
    steps before ``origin``).

    ``span_pred_x`` sums ``schedule.stretch(start, base)`` over the disturbed
    steps, the time the profile says they take. The profile assumes the core
    is the worker's alone. Within the disturbed span, ``rel_x`` is a step in
    a burst against a step between bursts, and ``rel_pred_x`` what the
    profile's share predicts for it on a core the worker had ``cpu_between``
    of between the bursts (others' weight stays, the burners' is added:
    1 + cpu_between x share / (1 - share); 1 / (1 - share) on an idle core).
    """
    base = [b - a for a, b, _ in steps if b < origin]
    if not base:
        raise ValueError("no baseline steps: measure longer before the bursts")
    w = _mean(base)
    after = [(a - origin, b - origin, c) for a, b, c in steps if a >= origin]
    inside = [
        b - a
        for a, b, _ in after
        if schedule.overlap(a - EDGE, b + EDGE) >= b - a + 2 * EDGE - 1e-9
    ]
    quiet = [
        (b - a, c) for a, b, c in after if schedule.overlap(a - EDGE, b + EDGE) == 0
    ]
    between = [t for t, _ in quiet]
    cpu = min(1.0, sum(c for _, c in quiet) / sum(between)) if quiet else math.nan
    took = sum(b - a for a, b, _ in after)
    predicted = sum(schedule.stretch(a, w) for a, _, _ in after)
    return {
        "base_ms": w * 1e3,
        "steps": float(len(after)),
        "burst_x": _mean(inside) / w,
        "burst_pred_x": schedule.slowdown,
        "between_x": _mean(between) / w,
        "cpu_between": cpu,
        "rel_x": _mean(inside) / _mean(between),
        "rel_pred_x": 1.0 + cpu * (schedule.slowdown - 1.0),
        "span_x": took / (len(after) * w) if after else float("nan"),
        "span_pred_x": predicted / (len(after) * w) if after else float("nan"),
        "ratio": took / predicted if predicted else float("nan"),
    }


def measure(
    share: float,
    *,
    model: str = LENET5,
    burst: float = 2.0,
    period: float = 6.0,
    baseline: float = 3.0,
    seconds: float = 18.0,
    batch: int = 32,
    seed: int = 0,
    core: int | None = None,
    mode: str = "auto",
    isolate: bool = False,
) -> Row:
    """Run the worker alone for ``baseline`` s, then ``seconds`` s disturbed."""
    core = min(os.sched_getaffinity(0)) if core is None else core
    args = [model, str(core), str(baseline + seconds), str(batch), str(seed)]
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    handle = None
    try:
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the worker for {model!r} did not start")
        time.sleep(baseline)
        # a phase from the seed, as the scenario's, on a schedule from now
        schedule = Bursts.seeded(burst, period, share, seed)
        handle = disturb.start(
            worker.pid, core=core, schedule=schedule, limit=seconds + 30.0,
            mode=mode, isolate=isolate,
        )  # fmt: skip
        out, _ = worker.communicate(timeout=seconds + 60.0)
        load = os.getloadavg()[0]
    finally:
        if handle is not None:
            handle.stop()
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    steps = [(float(a), float(b), float(c)) for a, b, c in json.loads(out)]
    # the profile the simulator would use: the share the burners really take
    real = Bursts(burst, period, handle.effective_share, schedule.phase)
    got = summarise(steps, handle.origin, real)
    burners = len(handle.pids)
    return Row(
        share, handle.effective_share, burners, handle.nice, got["base_ms"],
        int(got["steps"]), got["burst_x"], got["burst_pred_x"], got["between_x"],
        got["cpu_between"], got["rel_x"], got["rel_pred_x"],
        got["span_x"], got["span_pred_x"], got["ratio"], load,
        handle.mode + ("+isolated" if isolate else ""),
    )  # fmt: skip


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="the worker's model")
    parser.add_argument("--shares", default="0.5,0.8", help="competitor shares")
    parser.add_argument("--burst", type=float, default=2.0, help="seconds on")
    parser.add_argument("--period", type=float, default=6.0, help="seconds apart")
    parser.add_argument("--baseline", type=float, default=3.0, help="seconds alone")
    parser.add_argument(
        "--seconds", type=float, default=18.0, help="seconds disturbed, per share"
    )
    parser.add_argument(
        "--batch", type=int, default=None, help="32 (256 with --real-worker)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--mode", choices=disturb.MODES, default="auto", help="how the share is taken"
    )
    parser.add_argument(
        "--isolate", action="store_true", help="the worker real-time: its own core"
    )
    parser.add_argument(
        "--real-worker", action="store_true",
        help="an `edgeps worker` on a broker (bench paper's job): steps in/out",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from edgeps.observe.table import table

    if args.real_worker:
        from edgeps.lab.bench.disturb_worker import run_real

        return run_real(args)
    args.model = args.model or LENET5
    args.batch = args.batch or 32
    try:
        shares = [float(s) for s in str(args.shares).split(",") if s.strip()]
        Bursts(args.burst, args.period, max(shares, default=0.0))
        rows = [
            measure(
                s,
                model=args.model,
                burst=args.burst,
                period=args.period,
                baseline=args.baseline,
                seconds=args.seconds,
                batch=args.batch,
                seed=args.seed,
                mode=args.mode,
                isolate=args.isolate,
            )  # fmt: skip
            for s in shares
        ]
    except (ValueError, RuntimeError) as exc:
        print(f"edgeps bench disturb: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(r) for r in rows]))
        return 0
    header = [
        "share", "real", "burners", "base_ms", "steps", "burst_x", "pred_x",
        "between_x", "cpu_between", "rel_x", "rel_pred_x", "span_x", "span_pred_x",
        "ratio", "load",
    ]  # fmt: skip
    cells: list[list[Any]] = [
        [
            f"{r.share:g}",
            f"{r.effective_share:.3f}",
            f"{r.burners}+n{r.nice}" if r.mode == "fair" else f"1 {r.mode}",
            f"{r.base_ms:.2f}",
            str(r.steps),
            f"{r.burst_x:.2f}",
            f"{r.burst_pred_x:.2f}",
            f"{r.between_x:.2f}",
            f"{r.cpu_between:.2f}",
            f"{r.rel_x:.2f}",
            f"{r.rel_pred_x:.2f}",
            f"{r.span_x:.2f}",
            f"{r.span_pred_x:.2f}",
            f"{r.ratio:.2f}",
            f"{r.load:.1f}",
        ]  # fmt: skip
        for r in rows
    ]
    print(
        f"model {args.model}, batch {args.batch}, bursts of {args.burst:g} s "
        f"every {args.period:g} s; x = step time / the baseline step time"
    )
    print(table(header, cells))
    return 0
