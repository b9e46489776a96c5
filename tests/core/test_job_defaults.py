"""One job, one set of defaults: every command that runs a job runs it the same way."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from edgeps.cli import build_parser
from edgeps.core.defaults import JOB, worker_step_scale
from edgeps.core.server import ParameterServer
from edgeps.emulate.common import EmulationConfig
from edgeps.policy import parse_policy
from edgeps.runtime.config import ServeConfig, merge
from edgeps.sim.types import SimConfig
from edgeps.transport.options import ConnectionOptions


def job_of_serve(cfg: ServeConfig) -> dict[str, object]:
    return {
        "lr": cfg.lr,
        "lr_workers": cfg.lr_workers,
        "optimizer": cfg.optimizer,
        "staleness_aware": cfg.staleness_aware,
        "norm_guard": cfg.norm_guard,
        "eval_interval": cfg.eval_interval,
    }


def job_of_sim(cfg: SimConfig) -> dict[str, object]:
    aware = JOB.staleness_aware if cfg.staleness_aware is None else cfg.staleness_aware
    return {
        "lr": cfg.lr,
        "lr_workers": cfg.lr_workers,
        "optimizer": cfg.optimizer,
        "staleness_aware": aware,
        "norm_guard": cfg.norm_guard,
        "eval_interval": cfg.eval_interval,
    }


def parse(*argv: str) -> argparse.Namespace:
    return build_parser(argv[0]).parse_args(list(argv))


def test_serve_and_simulate_run_the_same_job_by_default() -> None:
    assert job_of_serve(ServeConfig()) == job_of_sim(SimConfig())


def test_the_cli_defaults_are_the_config_defaults() -> None:
    from edgeps.commands.demo import DEMO_DEFAULTS
    from edgeps.commands.serve import given

    serve = merge(given(parse("serve")))
    demo_flags = {**DEMO_DEFAULTS, **given(parse("demo"))}
    demo = merge({k: v for k, v in demo_flags.items() if k in ServeConfig().to_dict()})
    sim_args = parse("simulate")
    assert job_of_serve(serve) == job_of_serve(demo) == job_of_serve(ServeConfig())
    assert sim_args.lr == JOB.lr and sim_args.lr_workers == JOB.lr_workers
    assert sim_args.norm_guard == JOB.norm_guard and sim_args.optimizer == JOB.optimizer


def test_the_demo_overrides_no_job_default() -> None:
    from edgeps.commands.demo import DEMO_DEFAULTS

    assert not set(DEMO_DEFAULTS) & set(job_of_serve(ServeConfig()))


def test_every_worker_side_takes_the_same_batch() -> None:
    emu = EmulationConfig(ConnectionOptions(broker="mqtt://127.0.0.1:1"), "j")
    need = ("--broker", "mqtt://127.0.0.1:1", "--job", "j")
    assert parse("emulate", *need).batch == JOB.batch == emu.batch
    assert (
        parse("worker", *need, "--id", "w1", "--emulated", "sensors").batch
        == JOB.batch
        == SimConfig().batch_size
    )


def test_the_scale_bench_runs_the_job_defaults() -> None:
    from edgeps.lab.bench.scale_run import RunSpec

    spec = RunSpec(10, "dsp", 10.0)
    assert spec.model is None and spec.lr is None


def test_the_core_defaults_are_the_job_defaults() -> None:
    ps = ParameterServer(np.zeros(4, np.float32), policy=parse_policy("asp"))
    assert (ps.model.lr, ps.model.lr_workers, ps.model.staleness_aware) == (
        JOB.lr,
        JOB.lr_workers,
        JOB.staleness_aware,
    )


@pytest.mark.parametrize(
    ("ref", "live", "want"),
    [(16, 1, 1.0), (16, 16, 1.0), (16, 32, 0.5), (16, 512, 1 / 32), (0, 512, 1.0)],
)
def test_the_step_shrinks_past_the_reference_worker_count(
    ref: int, live: int, want: float
) -> None:
    assert worker_step_scale(ref, live) == pytest.approx(want)


def test_more_workers_never_make_a_larger_step_per_round() -> None:
    # a BSP round applies one push per live worker: its total step stays flat past R
    def round_step(n: int) -> float:
        return n * JOB.lr * worker_step_scale(JOB.lr_workers, n)

    steps = [round_step(n) for n in (1, 8, 16, 32, 64, 512, 2000)]
    assert steps == sorted(steps)
    assert max(steps) == pytest.approx(JOB.lr * JOB.lr_workers)


def test_simulate_runs_the_job_default_local_rounds() -> None:
    sim, args = SimConfig(), parse("simulate")
    local = ("local_steps", "local_epochs", "local_time", "server_opt", "server_lr")
    for name in local:
        assert getattr(sim, name) == getattr(args, name) == getattr(JOB, name)
    ps = ParameterServer(np.zeros(4, np.float32), policy=parse_policy("fedavg"))
    assert ps.model.server_lr == JOB.server_lr
    assert type(ps.model.server_optimizer).__name__.lower() == JOB.server_opt


def test_serve_and_simulate_run_the_same_privacy_by_default() -> None:
    names = ("dp", "dp_clip", "dp_noise", "dp_delta", "dp_epsilon_budget")
    serve, sim, args = ServeConfig(), SimConfig(), parse("simulate")
    from edgeps.commands.serve import given

    merged = merge(given(parse("serve")))
    for name in names:
        assert getattr(serve, name) == getattr(sim, name) == getattr(JOB, name)
        assert getattr(args, name) == getattr(merged, name) == getattr(JOB, name)
    assert JOB.dp == "off"
