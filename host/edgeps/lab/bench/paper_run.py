"""One run of the paper bench: workers, serve and the competitor on a real broker.

The workers start first and load their data; serve starts once every one is
waiting for its MODEL (``paper_start``), so the joins come together and the
clock (the first HELLO a passive broker client sees) charges no row for slow
starts. serve's metrics snapshots and JSON summary, and the client's bytes,
fill the run in (``paper_table``).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from edgeps.lab.bench.paper_plan import measured_step
from edgeps.lab.bench.paper_stale import update_curve
from edgeps.lab.bench.paper_start import RssSampler, join_spread, wait_ready
from edgeps.lab.bench.paper_table import (
    PaperRun,
    accuracy_curve,
    idle_fraction,
    read_metrics,
    staleness_series,
    target_key,
    time_to,
)  # fmt: skip
from edgeps.lab.bench.procs import edgeps, kill, tail


class _NotReady(RuntimeError):
    """Not every worker loaded its data in time: the run is not started."""


def disturbed_worker(n: int, seed: int, scenario: str = "disturbed") -> tuple[str, Any]:
    """The worker id the ``disturbed`` scenario picks for the seed, and its bursts."""
    from edgeps.workloads.scenarios import make_scenario

    sc = make_scenario(scenario, n, seed)
    wid, prof = next((w, p) for w, p in sc.profiles.items() if p.bursts)
    return wid, prof.bursts


def run_once(url: str, job: str, n: int, run: PaperRun, args: Any,
             s: dict[str, Any], workdir: Path) -> PaperRun:  # fmt: skip
    """One serve, ``n`` workers and the competitor; fills ``run`` in."""
    from edgeps.lab import disturb
    from edgeps.lab.bench.compression import Sniffer
    from edgeps.lab.bench.disturb_worker import CpuSampler, split_cpu
    from edgeps.workloads.scenarios import worker_ids

    metrics = workdir / f"{job}.metrics.jsonl"
    serve_err = workdir / f"{job}.serve.err"
    targets = s["targets"]
    grace = s["startup"] + 2.0 * n  # N processes start on the box's cores
    wid_d, bursts = disturbed_worker(n, run.seed, s["scenario"])
    run.disturbed = wid_d
    logs = [workdir / f"{job}.{wid}.log" for wid in worker_ids(n)]
    sniff = Sniffer(url, job)
    clock = time.time() - time.monotonic()  # monotonic -> epoch
    serve = None
    workers: dict[str, subprocess.Popen[bytes]] = {}
    handle = rss = None
    try:
        # workers first: they wait for serve's MODEL, so slow starts cost no row
        for i, (wid, log) in enumerate(zip(worker_ids(n), logs, strict=True)):
            with log.open("wb") as lf:
                workers[wid] = subprocess.Popen(edgeps(
                    "worker", "--broker", url, "--job", job, "--id", wid,
                    "--emulated", f"{args.dataset}:{i}/{n}", "--seed", str(run.seed),
                    "--batch", str(args.batch), "--log-level", "info",
                ), stdout=subprocess.DEVNULL, stderr=lf)  # fmt: skip
        rss = RssSampler([p.pid for p in workers.values()])
        alive = lambda: sum(p.poll() is None for p in workers.values())  # noqa: E731
        ready, run.load_s = wait_ready(logs, alive, grace)
        if ready < n:
            raise _NotReady(
                f"{ready} of {n} workers loaded their data in {run.load_s:.0f} s "
                f"({n - alive()} exited; the first one's log below)"
            )
        with serve_err.open("wb") as se:
            serve = subprocess.Popen(edgeps(
                "serve", "--broker", url, "--job", job, "--policy", run.policy,
                "--dataset", args.dataset, "--model", args.model,
                "--seed", str(run.seed), "--lr", str(args.lr),
                "--optimizer", args.optimizer,
                "--eval-interval", str(s["eval_interval"]), "--metrics-interval", "0.5",
                "--metrics-out", str(metrics), "--target-accuracy", str(s["stop"]),
                "--max-time", str(args.max_time), "--json", "--quiet",
            ), stdout=subprocess.PIPE, stderr=se)  # fmt: skip
            # the competitor's clock starts with serve, when training can
            handle = disturb.start(workers[wid_d].pid, schedule=bursts,
                                   limit=args.max_time + grace + 30)  # fmt: skip
            run.competitor = handle.mode
            cpu = CpuSampler(workers[wid_d].pid, handle.origin)
            try:
                out, _ = serve.communicate(timeout=args.max_time + s["startup"])
            except subprocess.TimeoutExpired:
                serve.kill()
                out, _ = serve.communicate(timeout=10)
                run.error = (f"serve did not end in --max-time + {s['startup']:g} s "
                             "(killed)")  # fmt: skip
            run.cpu_in, run.cpu_out = split_cpu(cpu.stop(), bursts)
        if not run.error and serve.returncode != 0:
            run.error = f"serve exited {serve.returncode}"
        if not run.error:
            try:
                summary = json.loads(out)
            except ValueError:
                run.error = "serve printed no JSON summary"
            else:
                _fill(run, summary, sniff, metrics, clock, n, targets)
    except _NotReady as exc:
        run.error = str(exc)
    finally:
        if handle is not None:
            handle.stop()
        if rss is not None:
            run.rss_mb = rss.stop() / 1024
        for p in workers.values():
            if p.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(5 if not run.error else 0.1)
            kill(p)
        kill(serve)
        sniff.close()
    if run.error:
        run.stderr_tail = tail(serve_err) or tail(logs[0])
    return run


def _fill(run: PaperRun, summary: dict[str, Any], sniff: Any, metrics: Path,
          clock: float, n: int, targets: list[float]) -> None:  # fmt: skip
    acc = summary.get("accuracy")
    run.final_accuracy = float(acc) if isinstance(acc, (int, float)) else None
    run.max_staleness = int(summary.get("max_staleness", 0))
    run.stop_reason = str(summary.get("stop_reason", ""))
    run.pushes = {w: int(v.get("accepted", 0))
                  for w, v in summary.get("workers", {}).items()}  # fmt: skip
    with sniff.lock:
        t0, up, down = sniff.first_hello, sniff.update_bytes, sniff.host_bytes
        hellos = dict(sniff.hellos)
    if t0 is None:
        run.error = "the broker client saw no HELLO"
        return
    run.bytes_per_worker = (up + down) / n
    try:
        snaps = read_metrics(metrics.read_text().splitlines())
    except OSError:
        snaps = []
    start = t0 + clock
    run.curve = accuracy_curve(snaps, start)
    run.times = {target_key(t): time_to(run.curve, t) for t in targets}
    run.idle_fraction = idle_fraction(snaps)
    run.staleness = staleness_series(snaps, run.disturbed, start)
    run.updates = update_curve(snaps)
    run.end_s = time.time() - start
    run.join_spread_s = join_spread(hellos, n)
    run.step_s = measured_step(snaps, run.disturbed)
