"""The paper bench's simulator column: the same job simulated, at a measured step.

Beside a real run (``edgeps.lab.bench.paper``) the simulator runs the same
model, data, workers, seed, policy and disturbance, its compute time the step
the real run measured, and its virtual time bounded by the real run's length.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any

from edgeps.lab.bench.paper_plan import SIM_SLACK, base_compute, sim_bound
from edgeps.lab.bench.paper_table import PaperRun, target_key, time_to


def step_in_process(args: Any, n: int) -> float:
    """Seconds of one real step at ``--batch``: the fallback calibration.

    Used only when the first real run of a worker count gave no compute time.
    The median of 5 ``NativeTrainer.step`` calls (after one warm-up) in this
    process on random data, times N / cores when N workers share fewer cores.
    """
    import numpy as np

    from edgeps.kernels import ModelSpec
    from edgeps.pyworker.localdata import LocalData
    from edgeps.pyworker.trainer import NativeTrainer
    from edgeps.runtime.model_forms import complete_model

    spec = ModelSpec.parse(complete_model(args.model, 784, 10, (1, 28, 28)))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, spec.n_features)).astype(np.float32)
    y = rng.integers(0, 10, len(X)).astype(np.int32)
    tr = NativeTrainer(spec, LocalData(X, y, "bench"), args.batch, 0)
    tr.step()
    took = []
    for _ in range(5):
        t = time.perf_counter()
        tr.step()
        took.append(time.perf_counter() - t)
    cores = len(os.sched_getaffinity(0))
    return sorted(took)[2] * max(1.0, n / cores)


def simulate_run(run: PaperRun, n: int, step: float, args: Any,
                 s: dict[str, Any]) -> None:  # fmt: skip
    """The simulator's prediction for ``run``: the same job, a step of ``step`` s.

    Its virtual time is bounded by ``SIM_SLACK`` times the real run's length
    (the simulator trains for real, so it costs about what the run did).
    """
    from edgeps.sim.simulator import Simulator
    from edgeps.sim.types import SimConfig

    targets = s["targets"]
    cfg = SimConfig(
        policy=run.policy, scenario=s["scenario"], n_workers=n, seed=run.seed,
        dataset=args.dataset, model=args.model, batch_size=args.batch,
        lr=args.lr, optimizer=args.optimizer, eval_interval=s["eval_interval"],
        target_accuracy=s["stop"],
        max_time=sim_bound(run.end_s, args.max_time, SIM_SLACK),
    )  # fmt: skip
    sim = Simulator(cfg)
    base = base_compute(step, args.batch)  # its iteration at --batch takes step s
    for w in sim.workers.values():  # the bursts stay, the base time is measured
        w.profile = dataclasses.replace(w.profile, compute_time=base)
    res = sim.run()
    run.simulated, run.sim_step_s = True, step
    run.sim_times = {target_key(t): time_to(res.trace, t) for t in targets}
    run.sim_final_accuracy = res.final_accuracy
    run.sim_idle_fraction = res.idle_fraction
    run.sim_max_staleness = res.max_staleness
