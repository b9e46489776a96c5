"""`edgeps bench rounds`: what BSP's round time is bounded by, balanced or not.

A BSP round lasts as long as its slowest board's iteration, so its expected
length is the expected maximum over the boards of one iteration each: compute
(the profile's own draw, interference spikes included) plus both link legs
(QoS 1: each lost attempt costs ``retry_timeout`` before the next). This
draws that maximum from a scenario's profiles, once at everyone's base batch
and once at the batch that evens out the boards' *typical* iterations (an
ideal assignment: what the balancer aims for, known from the profile instead
of measured), and reports the rounds per second, the samples per round and
how much sooner balancing can reach a given number of samples (or of
full-weight pushes) at best. No assignment removes a transient spike, so
where one board of many spikes in almost every round, this is the ceiling.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass

import numpy as np

from edgeps.workloads.scenarios import (
    BASE_BATCH,
    FIXED_FRACTION,
    WorkerProfile,
    make_scenario,
)


def leg(profile: WorkerProfile, rng: np.random.Generator, retry: float) -> float:
    """One message's delay: a lost attempt waits ``retry`` and is sent again."""
    waited = 0.0
    for _ in range(1000):
        delay = profile.sample_link(rng)
        if delay is not None:
            return waited + delay
        waited += retry
    return waited


def even_batches(
    profiles: list[WorkerProfile], base: int = BASE_BATCH, low: int = 2
) -> list[int]:
    """The batch that makes each board's typical iteration the median board's.

    Typical iteration at batch b: ``T_i (f + (1 - f) b / base) + 2 delay_i``
    (``f`` the fixed share of compute); the target is the median of these at
    the base batch; batches are clamped to ``[low, base]`` as the balancer's.
    """
    f = FIXED_FRACTION

    def typical(p: WorkerProfile, b: float) -> float:
        return p.typical_compute * (f + (1 - f) * b / base) + 2 * p.link_delay

    target = float(np.median([typical(p, base) for p in profiles]))
    out = []
    for p in profiles:
        per = p.typical_compute * (1 - f) / base
        fixed = typical(p, 0)
        b = (target - fixed) / per if per > 0 else base
        out.append(int(max(low, min(base, round(b)))))
    return out


def round_times(
    profiles: list[WorkerProfile],
    batches: list[int],
    rounds: int,
    seed: int = 0,
    retry: float = 0.3,
) -> np.ndarray:
    """``rounds`` draws of a BSP round: the max over boards of one iteration.

    Rounds follow each other from time 0, so a board with a competitor
    (``WorkerProfile.bursts``) is slowed in the rounds that meet its bursts.
    """
    rng = np.random.default_rng(seed)
    out = np.empty(rounds)
    now = 0.0
    for r in range(rounds):
        out[r] = max(
            p.stretch(now, p.sample_compute(rng, b))
            + leg(p, rng, retry)
            + leg(p, rng, retry)
            for p, b in zip(profiles, batches, strict=True)
        )
        now += float(out[r])
    return out


@dataclass
class Bound:
    scenario: str
    workers: int
    round_off: float  # expected round time, everyone at the base batch
    round_on: float  # at the even batches
    samples_off: int  # samples per round
    samples_on: int
    spike_share: float  # share of rounds with at least one interference spike

    @property
    def rounds_speedup(self) -> float:
        """How much sooner the same number of rounds (full-weight pushes) ends."""
        return self.round_off / self.round_on

    @property
    def samples_speedup(self) -> float:
        """How much sooner the same number of samples is through."""
        return (self.samples_on / self.round_on) / (self.samples_off / self.round_off)

    def to_dict(self) -> dict[str, object]:
        return {
            **self.__dict__,
            "rounds_speedup": self.rounds_speedup,
            "samples_speedup": self.samples_speedup,
        }


def bound(scenario: str, workers: int, rounds: int = 2000, seed: int = 0) -> Bound:
    """Expected BSP round time of ``scenario`` at ``workers``, balanced or not."""
    profiles = list(make_scenario(scenario, workers, seed).profiles.values())
    base = [BASE_BATCH] * len(profiles)
    even = even_batches(profiles)
    off = round_times(profiles, base, rounds, seed)
    on = round_times(profiles, even, rounds, seed + 1)
    p_any = 1.0 - float(np.prod([1.0 - p.interference_p for p in profiles]))
    return Bound(
        scenario,
        workers,
        float(off.mean()),
        float(on.mean()),
        sum(base),
        sum(even),
        p_any,
    )


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--scenarios", default="stragglers,mixed,lossy")
    parser.add_argument("--sizes", default="8,64", help="worker counts")
    parser.add_argument("--rounds", type=int, default=2000, help="draws per row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from edgeps.observe.table import table

    rows = [
        bound(sc.strip(), int(n), args.rounds, args.seed)
        for sc in args.scenarios.split(",")
        if sc.strip()
        for n in str(args.sizes).split(",")
    ]
    if args.json:
        print(json.dumps([r.to_dict() for r in rows]))
        return 0
    header = [
        "scenario",
        "workers",
        "spike_rounds",
        "round_off_s",
        "round_on_s",
        "samples_off",
        "samples_on",
        "x_rounds",
        "x_samples",
    ]
    cells = [
        [
            r.scenario,
            str(r.workers),
            f"{r.spike_share:.3f}",
            f"{r.round_off:.3f}",
            f"{r.round_on:.3f}",
            str(r.samples_off),
            str(r.samples_on),
            f"{r.rounds_speedup:.2f}",
            f"{r.samples_speedup:.2f}",
        ]
        for r in rows
    ]
    print(table(header, cells))
    return 0
