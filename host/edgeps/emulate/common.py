"""What both emulator engines share: the run's configuration and per-sensor reports."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, replace
from typing import Any

from edgeps.core.defaults import JOB
from edgeps.netem.units import format_rate
from edgeps.transport.options import ConnectionOptions
from edgeps.workloads.scenarios import WorkerProfile


def profile_class(p: WorkerProfile) -> str:
    """A short label for tables: what makes this sensor special."""
    tags = []
    if p.straggler_factor > 1:
        tags.append(f"straggler x{p.straggler_factor:g}")
    if p.interference_p > 0:
        tags.append(f"interference p={p.interference_p:g}")
    if p.bursts is not None:
        tags.append(
            f"disturbed {p.bursts.share:g} ({p.bursts.burst:g}/{p.bursts.period:g} s)"
        )
    if p.crash_at is not None:
        tags.append("churn")
    if p.link_rate:
        tags.append(format_rate(p.link_rate))
    if p.loss_p > 0:
        tags.append(f"loss {p.loss_p:g}")
    return ", ".join(tags) or "normal"


@dataclass
class SensorReport:
    """What one emulated sensor did, over all its lives."""

    worker_id: str
    profile: str
    lives: int = 0
    clock: int = 0
    stats: dict[str, int] = field(default_factory=dict)
    retransmits: int = 0
    last_loss: float = float("nan")
    stop_reason: str = ""
    error: str = ""
    link: dict[str, int] = field(default_factory=dict)  # shaped: bytes each way
    # bytes, seconds and joules (edgeps.emulate.usage), over all its lives
    usage: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, value: int) -> None:
        self.stats[name] = self.stats.get(name, 0) + value


@dataclass(frozen=True)
class EmulationConfig:
    connection: ConnectionOptions
    job: str
    n_workers: int = 8
    scenario: str = "homogeneous"
    dataset: str = "sensors"
    seed: int = 0
    iid: bool = True
    # how the sensors split the training rows (edgeps.workloads.datasets.partition),
    # instead of ``iid``'s "iid" or "dirichlet:0.5"
    partition: str | None = None
    duration: float | None = None
    batch: int = JOB.batch
    model: str | None = None  # None: take the job's MODEL
    max_iterations: int = 0
    heartbeat_ms: int = 5000
    release_timeout_ms: int = 15000
    max_chunk: int = 1 << 16  # whole-model messages, see edgeps.commands.worker
    hmac_key: bytes | None = None  # master key: each sensor signs with its own
    # explicit worker id -> profile, instead of a named scenario
    profiles: dict[str, WorkerProfile] | None = None
    # shape every sensor's link (bits/s, seconds, segment loss); None: scenario's
    link_rate: float | None = None
    link_delay: float | None = None
    link_loss: float | None = None
    # every sensor's base iteration time (s), instead of the scenario's
    compute_time: float | None = None
    # every sensor's lognormal sigma of that time, instead of the scenario's
    # (0: each step ends exactly its base time after it started)
    compute_jitter: float | None = None
    # loop engine: each step ends its drawn time after its message arrived, the
    # loop's wait to get to the sensor included (edgeps.emulate.timers.paced_rest)
    pace: bool = False
    # loop engine: gc.freeze() once every sensor joined (a process of its own)
    gc_freeze: bool = False
    # the energy model of each sensor's usage (edgeps.workloads.energy): which
    # board, and whether one waiting for its release sleeps
    board: str = "esp32"
    sleep_at_barrier: bool = False


def with_compute(
    profiles: dict[str, WorkerProfile], cfg: EmulationConfig
) -> dict[str, WorkerProfile]:
    """The profiles with ``cfg.compute_time`` as every sensor's base time and
    ``cfg.compute_jitter`` as its spread, each where set.

    A step lasts its drawn time from the moment it starts, the real gradient
    included (`edgeps.pyworker.trainer.EmulatedTrainer` sleeps the rest), so a
    sigma of 0 is a sensor that samples once a period and sleeps the rest of it.
    """
    t, sigma = cfg.compute_time, cfg.compute_jitter
    changes: dict[str, Any] = {}
    if t is not None:
        if not t > 0:
            raise ValueError("compute_time must be > 0 seconds")
        changes["compute_time"] = t
    if sigma is not None:
        if not (math.isfinite(sigma) and sigma >= 0):
            raise ValueError("compute_jitter must be a finite sigma >= 0")
        changes["compute_jitter"] = sigma
    if not changes:
        return profiles
    return {w: replace(p, **changes) for w, p in profiles.items()}


def add_compute_flags(parser: argparse.ArgumentParser) -> None:
    """`edgeps emulate`'s flags for every sensor's iteration time and its spread."""
    parser.add_argument(
        "--compute-time",
        type=float,
        metavar="S",
        help="base seconds per iteration of every sensor (default: the scenario's)",
    )
    parser.add_argument(
        "--compute-jitter",
        type=float,
        metavar="SIGMA",
        help="lognormal sigma of every sensor's iteration time; 0: each step ends "
        "exactly its base time after it started (default: the scenario's; "
        "homogeneous: 0.05)",
    )
    parser.add_argument(
        "--pace",
        action="store_true",
        help="loop engine: each step ends its time after its release arrived, "
        "the emulator's own wait to get to the sensor included",
    )


def partition_scheme(cfg: EmulationConfig) -> str:
    """The split the sensors take: ``cfg.partition``, else by ``cfg.iid``."""
    return cfg.partition or ("iid" if cfg.iid else "dirichlet:0.5")


def check_partition(scheme: str) -> str:
    """``scheme`` if it names a split ("iid", "dirichlet:A", "labelmix:A",
    A > 0), else ValueError: checked before any sensor loads its shard."""
    kind, _, alpha = scheme.partition(":")
    if scheme == "iid":
        return scheme
    try:
        ok = kind in ("dirichlet", "labelmix") and math.isfinite(float(alpha))
        ok = ok and float(alpha) > 0
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"bad --partition {scheme!r}: use iid, dirichlet:A or labelmix:A (A > 0)"
        )
    return scheme
