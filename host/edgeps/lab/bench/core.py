"""`edgeps bench core`: pushes/s the PS core handles per policy, without a network.

Simulated workers with fixed, unequal speeds (1x to 4x) push in virtual time;
only the time spent inside ``ParameterServer.handle`` is counted. The
bare optimizer step on the same vector is timed too, so the table shows what
the bookkeeping (validation, exactly-once, monitor, policy) costs on top.
The server checks each push with serve's default norm guard (``--norm-guard
0`` times it without).

Per-event cost. Each push is timed on its own: the table gives the median
and the 99th percentile of those times, so a cost that grows with the number
of workers shows as a row that grows down the ``--workers`` sizes (default
50, 500 and 2,000). ``--full-scan`` times the release pass that asks the
policy about every waiting worker (the rule the keyed pass must agree with).
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import time

import numpy as np

DEFAULT_POLICIES = ["asp", "bsp", "ssp:3", "kofn:auto", "dssp:sl=1,su=6", "dsp"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy",
        action="append",
        help=f"policy to time (repeatable; default: {' '.join(DEFAULT_POLICIES)})",
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[50, 500, 2000])
    parser.add_argument("--params", type=int, default=10_000, help="vector length")
    parser.add_argument(
        "--pushes",
        type=int,
        default=None,
        help="pushes per run (default: 5 per worker, at least 3000)",
    )
    parser.add_argument(
        "--full-scan",
        action="store_true",
        help="ask the policy about every waiting worker at each release pass",
    )
    parser.add_argument(
        "--repeat", dest="repeats", type=int, default=3, help="runs; median shown"
    )
    parser.add_argument(
        "--norm-guard",
        type=float,
        default=10.0,
        metavar="K",
        help="the server's norm guard, as in serve (default: 10; 0: off)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def time_policy(
    policy: str, n_workers: int, n_params: int, pushes: int, norm_guard: float = 0.0
) -> float:
    """Seconds spent in ``handle`` for ``pushes`` pushes."""
    return sum(push_times(policy, n_workers, n_params, pushes, norm_guard))


def push_times(
    policy: str,
    n_workers: int,
    n_params: int,
    pushes: int,
    norm_guard: float = 0.0,
    *,
    full_scan: bool = False,
) -> list[float]:
    """Seconds spent in ``handle`` for each of ``pushes`` pushes."""
    from edgeps.core import Join, ParameterServer, Push, Release
    from edgeps.core.norm_guard import NormGuard
    from edgeps.policy import parse_policy

    ps = ParameterServer(
        np.zeros(n_params, np.float32),
        policy=parse_policy(policy),
        lr=0.01,
        norm_guard=NormGuard(norm_guard) if norm_guard > 0 else None,
    )
    ps.keyed_release = not full_scan
    grad = np.random.default_rng(0).normal(size=n_params).astype(np.float32)
    speed = {f"w{i}": 1.0 + (i % 4) for i in range(n_workers)}
    base = dict.fromkeys(speed, 0)
    seq = dict.fromkeys(speed, -1)
    clock = dict.fromkeys(speed, 0)
    due: list[tuple[float, str]] = []
    for w in speed:
        ps.handle(Join(w), 0.0)
        heapq.heappush(due, (speed[w], w))
    spent: list[float] = []
    for _ in range(pushes):
        if not due:
            raise RuntimeError(f"{policy}: every worker is held (deadlock)")
        now, w = heapq.heappop(due)
        seq[w] += 1
        clock[w] += 1
        push = Push(w, clock[w], seq[w], base[w], grad, 0.5)
        t0 = time.perf_counter()
        actions = ps.handle(push, now)
        spent.append(time.perf_counter() - t0)
        for a in actions:
            if isinstance(a, Release):
                for r in a.worker_ids:
                    base[r] = a.version
                    heapq.heappush(due, (now + speed[r], r))
    return spent


def time_optimizer(n_params: int, pushes: int) -> float:
    """Seconds for ``pushes`` bare SGD steps on the same vector."""
    from edgeps import kernels

    params = np.zeros(n_params, np.float32)
    grad = np.ones(n_params, np.float32)
    t0 = time.perf_counter()
    for _ in range(pushes):
        kernels.sgd_step(params, grad, 0.01)
    return time.perf_counter() - t0


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(args: argparse.Namespace) -> int:
    from edgeps import kernels

    policies = args.policy or DEFAULT_POLICIES
    if args.pushes is not None and args.pushes < 1:
        raise SystemExit("--pushes must be >= 1")
    if args.params < 1:
        raise SystemExit("--params must be >= 1")
    if args.repeats < 1 or any(n < 1 for n in args.workers):
        raise SystemExit("--repeat and --workers must be >= 1")
    if not (args.norm_guard == 0 or args.norm_guard > 1):
        raise SystemExit("--norm-guard must be 0 (off) or > 1")
    step_pushes = args.pushes or 3000
    step = (
        statistics.median(
            time_optimizer(args.params, step_pushes) for _ in range(args.repeats)
        )
        / step_pushes
    )
    rows = []
    for policy in policies:
        for n in args.workers:
            pushes = args.pushes or max(3000, 5 * n)
            runs = [
                push_times(
                    policy,
                    n,
                    args.params,
                    pushes,
                    args.norm_guard,
                    full_scan=args.full_scan,
                )
                for _ in range(args.repeats)
            ]
            spent = statistics.median(sum(r) for r in runs)
            rows.append(
                {
                    "policy": policy,
                    "workers": n,
                    "pushes": pushes,
                    "pushes_per_s": pushes / spent,
                    "us_per_push": 1e6 * spent / pushes,
                    "us_per_push_p50": 1e6
                    * statistics.median(_quantile(r, 0.5) for r in runs),
                    "us_per_push_p99": 1e6
                    * statistics.median(_quantile(r, 0.99) for r in runs),
                    "vs_bare_step": spent / pushes / step,
                }
            )
    result = {
        "backend": kernels.backend_name(),
        "params": args.params,
        "pushes": args.pushes,
        "repeats": args.repeats,
        "bare_step_us": 1e6 * step,
        "norm_guard": args.norm_guard,
        "full_scan": args.full_scan,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"PS core, {args.params} params, median of {args.repeats} runs; kernels "
        f"backend {result['backend']}; bare SGD step {result['bare_step_us']:.1f} us;"
        f" norm guard {args.norm_guard:g}"
        + (" (off)" if not args.norm_guard else "")
        + ("; full-scan release passes" if args.full_scan else "")
    )
    head = ("policy", "workers", "pushes", "pushes/s", "us/push", "p50 us", "p99 us")
    print(f"{head[0]:<16} " + " ".join(f"{h:>8}" for h in head[1:]) + "  x step")
    print(f"{'-' * 16} " + " ".join("-" * 8 for _ in head[1:]) + "  ------")
    for r in rows:
        print(
            f"{r['policy']:<16} {r['workers']:>8} {r['pushes']:>8} "
            f"{r['pushes_per_s']:>8.0f} {r['us_per_push']:>8.1f} "
            f"{r['us_per_push_p50']:>8.1f} {r['us_per_push_p99']:>8.1f}"
            f"  {r['vs_bare_step']:>6.1f}"
        )
    return 0
