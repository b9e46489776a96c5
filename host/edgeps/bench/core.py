"""`edgeps bench core`: pushes/s the PS core handles per policy, without a network.

Simulated workers with fixed, unequal speeds (1x to 4x) push in virtual time;
only the time spent inside ``ParameterServer.handle`` is counted. The
bare optimizer step on the same vector is timed too, so the table shows what
the bookkeeping (validation, exactly-once, monitor, policy) costs on top.
The server checks each push with serve's default norm guard (``--norm-guard
0`` times it without).
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
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--params", type=int, default=10_000, help="vector length")
    parser.add_argument("--pushes", type=int, default=3000, help="pushes per run")
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
    from edgeps.core import Join, ParameterServer, Push, Release
    from edgeps.core.norm_guard import NormGuard
    from edgeps.policy import parse_policy

    ps = ParameterServer(
        np.zeros(n_params, np.float32),
        policy=parse_policy(policy),
        lr=0.01,
        norm_guard=NormGuard(norm_guard) if norm_guard > 0 else None,
    )
    grad = np.random.default_rng(0).normal(size=n_params).astype(np.float32)
    speed = {f"w{i}": 1.0 + (i % 4) for i in range(n_workers)}
    base = dict.fromkeys(speed, 0)
    seq = dict.fromkeys(speed, -1)
    clock = dict.fromkeys(speed, 0)
    due: list[tuple[float, str]] = []
    for w in speed:
        ps.handle(Join(w), 0.0)
        heapq.heappush(due, (speed[w], w))
    spent = 0.0
    for _ in range(pushes):
        if not due:
            raise RuntimeError(f"{policy}: every worker is held (deadlock)")
        now, w = heapq.heappop(due)
        seq[w] += 1
        clock[w] += 1
        push = Push(w, clock[w], seq[w], base[w], grad, 0.5)
        t0 = time.perf_counter()
        actions = ps.handle(push, now)
        spent += time.perf_counter() - t0
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


def run(args: argparse.Namespace) -> int:
    from edgeps import kernels

    policies = args.policy or DEFAULT_POLICIES
    for name, value in (("--params", args.params), ("--pushes", args.pushes)):
        if value < 1:
            raise SystemExit(f"{name} must be >= 1")
    if args.repeats < 1 or any(n < 1 for n in args.workers):
        raise SystemExit("--repeat and --workers must be >= 1")
    if not (args.norm_guard == 0 or args.norm_guard > 1):
        raise SystemExit("--norm-guard must be 0 (off) or > 1")
    step = statistics.median(
        time_optimizer(args.params, args.pushes) for _ in range(args.repeats)
    )
    rows = []
    for policy in policies:
        for n in args.workers:
            spent = statistics.median(
                time_policy(policy, n, args.params, args.pushes, args.norm_guard)
                for _ in range(args.repeats)
            )
            rows.append(
                {
                    "policy": policy,
                    "workers": n,
                    "pushes_per_s": args.pushes / spent,
                    "us_per_push": 1e6 * spent / args.pushes,
                    "vs_bare_step": spent / step,
                }
            )
    result = {
        "backend": kernels.backend_name(),
        "params": args.params,
        "pushes": args.pushes,
        "repeats": args.repeats,
        "bare_step_us": 1e6 * step / args.pushes,
        "norm_guard": args.norm_guard,
        "rows": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(
        f"PS core, {args.params} params, {args.pushes} pushes, median of "
        f"{args.repeats}; kernels backend {result['backend']}; bare SGD step "
        f"{result['bare_step_us']:.1f} us; norm guard "
        f"{args.norm_guard:g}" + (" (off)" if not args.norm_guard else "")
    )
    print(
        f"{'policy':<16} {'workers':>7} {'pushes/s':>10} {'us/push':>8} {'x step':>7}"
    )
    print(f"{'-' * 16} {'-' * 7} {'-' * 10} {'-' * 8} {'-' * 7}")
    for r in rows:
        print(
            f"{r['policy']:<16} {r['workers']:>7} {r['pushes_per_s']:>10.0f} "
            f"{r['us_per_push']:>8.1f} {r['vs_bare_step']:>7.1f}"
        )
    return 0
