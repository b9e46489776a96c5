"""Named worker-behaviour scenarios shared by the simulator and the MQTT emulator.

A ``WorkerProfile`` says how long one iteration takes on a board (base compute
time times a persistent straggler factor, sometimes hit by transient
interference, or a competing process's bursts on a clock: ``bursts``), how
its link behaves (delay, jitter, loss), and whether it crashes and rejoins.
``make_scenario(name, n_workers, seed)`` builds the same profiles for a seed
every time; ``disturbed:burst=2,period=6,share=0.8,workers=1`` sets the
disturbed scenario's parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from edgeps.workloads.bursts import Bursts, parse_bursts

BASE_COMPUTE = 0.1  # seconds per iteration of a normal board at batch 32
BASE_BATCH = 32  # the batch BASE_COMPUTE is measured at
FIXED_FRACTION = 0.1  # share of an iteration at the base batch that no batch changes
BASE_LINK = 0.005  # one-way delay of a quiet Wi-Fi link, seconds


def compute_scale(macs: int, n_params: int) -> float:
    """How much longer than the base time a model's step takes, from its FLOPs.

    The base time is a dense model's step, about one multiply-add per weight
    per sample whatever its size; a conv model reuses each weight along the
    window (image) and makes ``macs / n_params`` multiply-adds per parameter,
    so its step is that many times longer. At least 1: dense models keep the
    base time.
    """
    if macs <= 0 or n_params <= 0:
        return 1.0
    return max(1.0, macs / n_params)


@dataclass(frozen=True)
class WorkerProfile:
    """How one worker behaves; all times in seconds.

    Parameters
    ----------
    compute_time: base time of one iteration on a normal board.
    straggler_factor: persistent slowdown (4.0 = four times slower, always).
    compute_jitter: relative spread of each iteration (lognormal sigma).
    interference_p: chance per iteration of a transient slowdown (another task).
    interference_factor: how much slower such an iteration is.
    link_delay, link_jitter: one-way delay and its spread (exponential extra).
    loss_p: chance a message is lost on the link (QoS 1 retries it); on a
        shaped link, the chance a TCP segment is lost (a retransmission timeout).
    link_rate: None for the plain delay model above; bits/s of a shaped link
        (token bucket both ways over real bytes, see edgeps.netem.shaping),
        0 for a shaped link without a bandwidth limit.
    crash_at, rejoin_at: the worker dies at ``crash_at`` and restarts, as a new
        incarnation, at ``rejoin_at`` (None: never).
    max_batch: the largest batch the board's memory takes (0: no limit); it
        announces it when it joins.
    bursts: another process competing for the board's CPU on a clock
        (``edgeps.workloads.bursts``); None: nothing else runs. Its compute
        is stretched by ``stretch(start, seconds)``, not by ``sample_compute``.
    """

    compute_time: float = BASE_COMPUTE
    straggler_factor: float = 1.0
    compute_jitter: float = 0.05
    interference_p: float = 0.0
    interference_factor: float = 1.0
    link_delay: float = BASE_LINK
    link_jitter: float = 0.0
    loss_p: float = 0.0
    crash_at: float | None = None
    rejoin_at: float | None = None
    max_batch: int = 0
    link_rate: float | None = None
    bursts: Bursts | None = None

    def __post_init__(self) -> None:
        nums = {
            "compute_time": self.compute_time,
            "straggler_factor": self.straggler_factor,
            "compute_jitter": self.compute_jitter,
            "interference_factor": self.interference_factor,
            "link_delay": self.link_delay,
            "link_jitter": self.link_jitter,
        }
        for key, value in nums.items():
            if not (np.isfinite(value) and value >= 0):
                raise ValueError(f"{key} must be a finite number >= 0, got {value!r}")
        if self.compute_time <= 0 or self.straggler_factor <= 0:
            raise ValueError("compute_time and straggler_factor must be > 0")
        for key, p in (
            ("interference_p", self.interference_p),
            ("loss_p", self.loss_p),
        ):
            if not 0.0 <= p < 1.0:
                raise ValueError(f"{key} must be in [0, 1), got {p!r}")
        if isinstance(self.max_batch, bool) or not (
            isinstance(self.max_batch, int) and self.max_batch >= 0
        ):
            raise ValueError(f"max_batch must be an int >= 0, got {self.max_batch!r}")
        if self.link_rate is not None and not (
            np.isfinite(self.link_rate) and self.link_rate >= 0
        ):
            raise ValueError(f"link_rate must be bits/s >= 0, got {self.link_rate!r}")
        if self.bursts is not None and not isinstance(self.bursts, Bursts):
            raise TypeError(f"bursts must be a Bursts or None, got {self.bursts!r}")
        if self.rejoin_at is not None and (
            self.crash_at is None or self.rejoin_at <= self.crash_at
        ):
            raise ValueError("rejoin_at needs a crash_at before it")

    def for_model(self, macs: int, n_params: int) -> WorkerProfile:
        """This profile for a model of ``macs`` multiply-adds per sample and
        ``n_params`` parameters: `compute_scale` times the base time."""
        scale = compute_scale(macs, n_params)
        return (
            self
            if scale == 1.0
            else replace(self, compute_time=self.compute_time * scale)
        )

    @property
    def typical_compute(self) -> float:
        """Iteration time without interference, i.e. most of the time."""
        return self.compute_time * self.straggler_factor

    def sample_compute(
        self, rng: np.random.Generator, batch: int = BASE_BATCH
    ) -> float:
        """Draw the duration of one iteration at ``batch`` samples.

        A tenth of the time at the base batch is fixed cost (loading the model,
        framing the push); the rest grows linearly with the batch.
        """
        scale = FIXED_FRACTION + (1.0 - FIXED_FRACTION) * batch / BASE_BATCH
        t = (
            self.typical_compute
            * scale
            * float(rng.lognormal(0.0, self.compute_jitter))
        )
        if self.interference_p > 0 and rng.random() < self.interference_p:
            t *= self.interference_factor
        return t

    def stretch(self, start: float, seconds: float) -> float:
        """Wall seconds that ``seconds`` of compute started at ``start`` take
        (seconds since the job started), the competitor's bursts included."""
        if self.bursts is None:
            return seconds
        return self.bursts.stretch(start, seconds)

    def sample_link(self, rng: np.random.Generator) -> float | None:
        """Draw the one-way delay of one message, or None if this attempt is lost."""
        if self.loss_p > 0 and rng.random() < self.loss_p:
            return None
        extra = (
            float(rng.exponential(self.link_jitter)) if self.link_jitter > 0 else 0.0
        )
        return self.link_delay + extra

    def alive_at(self, t: float) -> bool:
        """Whether the board is running at time ``t``."""
        if self.crash_at is None or t < self.crash_at:
            return True
        return self.rejoin_at is not None and t >= self.rejoin_at


@dataclass(frozen=True)
class Scenario:
    """A named set of worker profiles, keyed by worker id."""

    name: str
    description: str
    profiles: dict[str, WorkerProfile]

    @property
    def n_workers(self) -> int:
        return len(self.profiles)


def worker_ids(n_workers: int) -> list[str]:
    """Stable worker ids ``w00, w01, ...`` used by the simulator and the emulator."""
    return [f"w{i:02d}" for i in range(n_workers)]


def _pick(rng: np.random.Generator, n: int, k: int) -> set[int]:
    return {int(i) for i in rng.choice(n, size=min(k, n), replace=False)}


def _n_stragglers(n: int) -> int:
    return max(1, n // 4) if n > 1 else 0  # 2 of 8


def _homogeneous(n: int, rng: np.random.Generator) -> list[WorkerProfile]:
    return [WorkerProfile() for _ in range(n)]


def _stragglers(n: int, rng: np.random.Generator) -> list[WorkerProfile]:
    slow = _pick(rng, n, _n_stragglers(n))
    return [WorkerProfile(straggler_factor=4.0 if i in slow else 1.0) for i in range(n)]


def _interference(n: int, rng: np.random.Generator) -> list[WorkerProfile]:
    return [
        WorkerProfile(interference_p=0.1, interference_factor=5.0) for _ in range(n)
    ]


DISTURBED = {"burst": 2.0, "period": 6.0, "share": 0.8, "workers": 1.0}


def _disturbed(
    n: int, rng: np.random.Generator, seed: int, params: dict[str, float]
) -> list[WorkerProfile]:
    unknown = set(params) - set(DISTURBED)
    if unknown:
        raise ValueError(
            f"unknown disturbed parameter(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(DISTURBED)}"
        )
    p = {**DISTURBED, **params}
    k = p["workers"]
    if not (np.isfinite(k) and k == int(k) and 1 <= k <= n):
        raise ValueError(f"workers must be an int in [1, {n}], got {k:g}")
    bursts = Bursts.seeded(p["burst"], p["period"], p["share"], seed)
    hit = _pick(rng, n, int(k))
    return [WorkerProfile(bursts=bursts if i in hit else None) for i in range(n)]


def _mixed(n: int, rng: np.random.Generator) -> list[WorkerProfile]:
    out = []
    for p in _stragglers(n, rng):
        out.append(
            replace(
                p,
                interference_p=0.1,
                interference_factor=5.0,
                link_delay=BASE_LINK * float(rng.uniform(1.0, 4.0)),
                link_jitter=0.01,
                loss_p=0.01,
            )
        )
    return out


def _lossy(n: int, rng: np.random.Generator) -> list[WorkerProfile]:
    # a crowded 2.4 GHz band: slow, jittery links that lose one message in 8
    return [
        WorkerProfile(
            link_delay=BASE_LINK * float(rng.uniform(2.0, 6.0)),
            link_jitter=0.02,
            loss_p=0.125,
        )
        for _ in range(n)
    ]


def _churn(n: int, rng: np.random.Generator) -> list[WorkerProfile]:
    out = [WorkerProfile(link_jitter=0.005) for _ in range(n)]
    for i in sorted(_pick(rng, n, _n_stragglers(n))):
        crash = float(rng.uniform(5.0, 20.0))
        out[i] = replace(
            out[i], crash_at=crash, rejoin_at=crash + float(rng.uniform(10, 20))
        )
    return out


def _slowlinks(n: int, rng: np.random.Generator) -> list[WorkerProfile]:
    slow = _pick(rng, n, _n_stragglers(n))
    return [
        WorkerProfile(
            link_rate=64e3 if i in slow else 250e3, link_delay=0.02, loss_p=0.01
        )
        for i in range(n)
    ]


_BUILDERS: dict[
    str, tuple[Callable[[int, np.random.Generator], list[WorkerProfile]], str]
] = {
    "homogeneous": (_homogeneous, "identical boards, quiet links"),
    "stragglers": (_stragglers, "a quarter of the boards (2 of 8) are 4x slower"),
    "interference": (_interference, "every iteration has p=0.1 of a 5x slowdown"),
    "disturbed": (
        _homogeneous,  # built by _disturbed, with its parameters and the seed
        "one board shares its CPU with another process: bursts of 2 s every "
        "6 s taking 0.8 of it (5x slower meanwhile); disturbed:burst=..,"
        "period=..,share=..,workers=.. to change them",
    ),
    "mixed": (
        _mixed,
        "stragglers + interference (p=0.1, 5x) + link delay, jitter and 1% loss",
    ),
    "churn": (_churn, "a quarter of the boards crash and rejoin 10-20 s later"),
    "lossy": (_lossy, "every link 10-30 ms, 20 ms jitter, loses 1 message in 8"),
    "slowlinks": (
        _slowlinks,
        "LTE-M-like links: 250 kbit/s (a quarter at 64 kbit/s), 20 ms, 1% loss",
    ),
}

SCENARIOS: tuple[str, ...] = tuple(_BUILDERS)


def make_scenario(name: str, n_workers: int = 8, seed: int = 0) -> Scenario:
    """Build the named scenario for ``n_workers``, deterministic for ``seed``.

    ``disturbed:key=value,...`` sets the disturbed scenario's burst, period,
    share and number of disturbed workers (the rest keep their defaults).
    """
    base, colon, args = name.partition(":")
    if base not in _BUILDERS or (colon and base != "disturbed"):
        raise ValueError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    if not isinstance(n_workers, int) or isinstance(n_workers, bool) or n_workers < 1:
        raise ValueError("n_workers must be an int >= 1")
    builder, description = _BUILDERS[base]
    rng = np.random.default_rng(seed)
    if base == "disturbed":
        profiles = _disturbed(n_workers, rng, seed, parse_bursts(args))
        description = (
            f"{sum(p.bursts is not None for p in profiles)} of {n_workers} boards "
            f"disturbed: {next(p.bursts for p in profiles if p.bursts).describe()}"
        )
    else:
        profiles = builder(n_workers, rng)
    return Scenario(
        name, description, dict(zip(worker_ids(n_workers), profiles, strict=True))
    )
