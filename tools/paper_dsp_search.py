"""Simulated policies on the paper bench's job: virtual time to a target, at a set step.

LeNet-5 on MNIST, 3 workers, the ``disturbed`` scenario (``--scenario`` sets
its burst, period and share), SGD lr 0.05, batch 256, evaluation every virtual
second; every worker's iteration takes STEP s (``base_compute`` undoes the
profile's batch scaling). One line per policy and seed, then per worker: its
applied pushes, their mean and largest staleness (versions) and how often the
policy held it. Used to pick `edgeps bench paper`'s tuned DSP row.

    python tools/paper_dsp_search.py 0.035 0 0.9 15 dsp:w=2 dsp:w=4,grace=1 bsp
    python tools/paper_dsp_search.py --scenario disturbed:burst=4,period=6,share=0.9 \
        0.054 0,1,2 0.95 30 asp dsp
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import time
from collections import Counter, defaultdict

from edgeps.lab.bench.paper_plan import base_compute
from edgeps.lab.bench.paper_table import time_to
from edgeps.sim.simulator import Simulator
from edgeps.sim.types import SimConfig


def run(policy: str, seed: int, a: argparse.Namespace) -> None:
    t0 = time.time()
    cfg = SimConfig(policy=policy, scenario=a.scenario, n_workers=a.workers,
                    seed=seed, dataset="mnist", model="lenet5",
                    batch_size=256, lr=a.lr, optimizer="sgd",
                    eval_interval=1.0, target_accuracy=a.target,
                    max_time=a.max_time, stop_at_target=a.stop)  # fmt: skip
    sim = Simulator(cfg)
    for w in sim.workers.values():
        w.profile = dataclasses.replace(
            w.profile, compute_time=base_compute(a.step, 256)
        )
    stale: dict[str, list[int]] = defaultdict(list)
    holds: Counter[str] = Counter()
    held_at: dict[str, float] = {}  # worker -> when its current hold began
    waits: list[tuple[float, float]] = []  # (hold start, seconds held)
    applied, held, released = sim.on_applied, sim.on_held, sim.on_release

    def on_release(action):  # type: ignore[no-untyped-def]
        for wid, _ in action.targets():
            if wid in held_at:
                start = held_at.pop(wid)
                waits.append((start, sim.loop.now - start))
        released(action)

    def on_applied(action):  # type: ignore[no-untyped-def]
        stale[action.worker_id].append(action.staleness)
        applied(action)

    def on_held(action):  # type: ignore[no-untyped-def]
        holds[action.worker_id] += 1
        held_at.setdefault(action.worker_id, sim.loop.now)
        held(action)

    sim.on_applied, sim.on_held = on_applied, on_held  # type: ignore[method-assign]
    sim.on_release = on_release  # type: ignore[method-assign]
    disturbed = next((w for w, p in sim.scenario.profiles.items() if p.bursts), "")
    bursts = sim.scenario.profiles[disturbed].bursts if disturbed else None
    res = sim.run()
    every = [s for v in stale.values() for s in v]
    print(f"{policy} seed {seed}: t{a.target:g} {time_to(res.trace, a.target)} "
          f"final {res.final_accuracy:.3f} applied {res.applied} "
          f"mean staleness {statistics.fmean(every) if every else 0:.2f} "
          f"max {res.max_staleness} idle {res.idle_fraction:.2f} "
          f"({time.time() - t0:.0f} s wall)", flush=True)  # fmt: skip
    if a.detail:
        for wid in sorted(stale):
            v = stale[wid]
            mark = " (disturbed)" if wid == disturbed else ""
            print(f"    {wid}{mark}: applied {len(v)} staleness mean "
                  f"{statistics.fmean(v):.2f} max {max(v)} held {holds[wid]}",
                  flush=True)  # fmt: skip
        if bursts is not None and waits:
            # seconds held by where the hold began in the competitor's period
            bins = [0.0] * int(math.ceil(bursts.period))
            for start, took in waits:
                bins[int((start - bursts.phase) % bursts.period)] += took
            print(f"    held s by second of the period (burst: the first "
                  f"{bursts.burst:g}): " + " ".join(f"{b:.1f}" for b in bins),
                  flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("step", type=float, help="s an iteration takes")
    p.add_argument("seeds", help="comma-separated")
    p.add_argument("target", type=float)
    p.add_argument("max_time", type=float, help="virtual s")
    p.add_argument("policies", nargs="+")
    p.add_argument("--scenario", default="disturbed")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--stop", action="store_true", help="stop at the target")
    p.add_argument("--detail", action="store_true", help="per-worker lines")
    a = p.parse_args()
    for policy in a.policies:
        for seed in (int(x) for x in a.seeds.split(",")):
            run(policy, seed, a)


if __name__ == "__main__":
    main()
