"""Simulated policies on the paper bench's job: virtual time to a target, at a set step.

LeNet-5 on MNIST, 3 workers, the ``disturbed`` scenario, SGD lr 0.05, batch
256, evaluation every virtual second; every worker's iteration takes STEP s
(``base_compute`` undoes the profile's batch scaling). One line per policy and
seed. Used to pick `edgeps bench paper`'s tuned DSP row.

    python tools/paper_dsp_search.py 0.035 0 0.9 15 dsp:w=2 dsp:w=4,grace=1 bsp
"""

from __future__ import annotations

import dataclasses
import sys
import time

from edgeps.lab.bench.paper_plan import base_compute
from edgeps.lab.bench.paper_table import time_to
from edgeps.sim.simulator import Simulator
from edgeps.sim.types import SimConfig


def main() -> None:
    step, seeds = float(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
    target, max_time = float(sys.argv[3]), float(sys.argv[4])
    for policy in sys.argv[5:]:
        for seed in seeds:
            t0 = time.time()
            cfg = SimConfig(policy=policy, scenario="disturbed", n_workers=3,
                            seed=seed, dataset="mnist", model="lenet5",
                            batch_size=256, lr=0.05, optimizer="sgd",
                            eval_interval=1.0, target_accuracy=target,
                            max_time=max_time)  # fmt: skip
            sim = Simulator(cfg)
            for w in sim.workers.values():
                w.profile = dataclasses.replace(
                    w.profile, compute_time=base_compute(step, 256)
                )
            res = sim.run()
            print(f"{policy} seed {seed}: t{target:g} {time_to(res.trace, target)} "
                  f"final {res.final_accuracy:.3f} max staleness {res.max_staleness} "
                  f"idle {res.idle_fraction:.2f} ({time.time() - t0:.0f} s wall)",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
