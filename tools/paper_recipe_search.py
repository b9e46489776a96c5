"""Simulated rows of the paper bench at N workers and several lr: which lr trains all.

LeNet-5 on a dataset (default MNIST), N workers, the default ``disturbed``
scenario, SGD at batch 256, evaluation every virtual second; every worker's
iteration takes STEP s (``base_compute`` undoes the profile's batch scaling;
N workers sharing 2 cores: about 25 ms x N / 2). serve's default lr scaling
past 16 live workers applies, as in the bench. One line per (lr, policy, seed).
Used to choose `edgeps bench paper`'s recipe per worker count (paper_plan.RECIPES).

    python tools/paper_recipe_search.py 8 0.1 0.05,0.02,0.01 0 0.9 20 bsp asp
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time

from edgeps.lab.bench.paper_plan import base_compute
from edgeps.lab.bench.paper_table import time_to
from edgeps.sim.simulator import Simulator
from edgeps.sim.types import SimConfig


def main() -> None:
    n, step = int(sys.argv[1]), float(sys.argv[2])
    lrs = [float(x) for x in sys.argv[3].split(",")]
    seeds = [int(x) for x in sys.argv[4].split(",")]
    target, max_time = float(sys.argv[5]), float(sys.argv[6])
    dataset = os.environ.get("PAPER_DATASET", "mnist")
    for lr in lrs:
        for policy in sys.argv[7:]:
            for seed in seeds:
                t0 = time.time()
                cfg = SimConfig(policy=policy, scenario="disturbed", n_workers=n,
                                seed=seed, dataset=dataset, model="lenet5",
                                batch_size=256, lr=lr, optimizer="sgd",
                                eval_interval=1.0, target_accuracy=target,
                                max_time=max_time)  # fmt: skip
                sim = Simulator(cfg)
                for w in sim.workers.values():
                    w.profile = dataclasses.replace(
                        w.profile, compute_time=base_compute(step, 256)
                    )
                res = sim.run()
                half = time_to(res.trace, 0.5)
                print(f"N={n} lr {lr:g} {policy} seed {seed}: t0.5 {half} "
                      f"t{target:g} {time_to(res.trace, target)} "
                      f"final {res.final_accuracy:.3f} at {res.trace[-1][0]:.0f} s "
                      f"max staleness {res.max_staleness} "
                      f"idle {res.idle_fraction:.2f} ({time.time() - t0:.0f} s wall)",
                      flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
