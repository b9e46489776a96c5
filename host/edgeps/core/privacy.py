"""Differential privacy of the applied updates: clip each to a norm, add Gaussian noise.

The Gaussian mechanism of DP-SGD (Abadi et al., "Deep Learning with
Differential Privacy", CCS 2016): an update is scaled down to L2 norm at most
``clip`` (C) and every coordinate gets noise drawn from N(0, (sigma x C)^2),
where sigma is the noise multiplier. Whatever the records of a batch, the
update the PS applies then moves by at most 2C when one of them changes, and
that move is hidden in noise sigma x C (``edgeps.observe.privacy`` accounts
for the 2C).

- central: the PS clips and noises every update it applies (``DPMechanism``
  in ``ModelStep``); a policy that aggregates a round collects noisy updates,
  so an aggregate of K of them carries noise sigma x C / sqrt(K) per
  coordinate of the mean.
- local: each CPython worker clips and noises its own update before it sends
  it (``privatize``); the PS only counts the updates it applies, for the
  accountant. It trusts the workers to run with the settings it was given.

This module is pure: it counts the applied updates by their sampling rate and
draws noise from a seeded numpy ``Generator`` (reproducible in the
simulator). The accountant that turns the counts into (epsilon, delta) is
``edgeps.observe.privacy``.
"""

from __future__ import annotations

import math

import numpy as np

DP_MODES = ("off", "central", "local")


def check_dp(mode: str, clip: float, noise: float) -> None:
    """Refuse an unknown mode, a clip that is not > 0, a noise multiplier below 0."""
    if mode not in DP_MODES:
        raise ValueError(f"--dp must be one of {', '.join(DP_MODES)}, got {mode!r}")
    if not (isinstance(clip, (int, float)) and math.isfinite(clip) and clip > 0):
        raise ValueError(f"--dp-clip must be a finite number > 0, got {clip!r}")
    if not (isinstance(noise, (int, float)) and math.isfinite(noise) and noise >= 0):
        raise ValueError(f"--dp-noise must be a finite number >= 0, got {noise!r}")


def privatize(
    update: np.ndarray, clip: float, noise: float, rng: np.random.Generator
) -> tuple[np.ndarray, bool]:
    """(``update`` scaled to L2 norm <= ``clip`` plus N(0, (noise x clip)^2), clipped?).

    A new float32 array; ``update`` is not written to. The arithmetic is in
    float64. ``noise`` 0 draws nothing from ``rng``.
    """
    values = np.asarray(update, dtype=np.float64).reshape(-1)
    norm = float(np.linalg.norm(values))
    clipped = norm > clip
    if clipped:
        values = values * (clip / norm)
    if noise > 0:
        values = values + rng.normal(0.0, noise * clip, size=values.shape)
    return values.astype(np.float32), clipped


class DPMechanism:
    """Clip and noise each applied update (central) or count it (local).

    Parameters
    ----------
    clip : C, the L2 norm each update is clipped to (the update as the worker
        sends it: a gradient, or a delta after local steps).
    noise : sigma, the noise multiplier: the noise's standard deviation is
        sigma x C per coordinate.
    mode : "central" (the PS privatizes) or "local" (the workers did).
    seed : seeds the noise's ``numpy.random.Generator``.
    rates : each worker's sampling rate, batch / samples of its shard, for
        the accountant; a worker not in it counts at rate 1 (every update may
        hold any record of its shard).
    """

    def __init__(
        self,
        clip: float,
        noise: float,
        *,
        mode: str = "central",
        seed: int | None = 0,
        rates: dict[str, float] | None = None,
    ) -> None:
        if mode == "off":
            raise ValueError("no DPMechanism for --dp off: pass None")
        check_dp(mode, clip, noise)
        self.clip = float(clip)
        self.noise = float(noise)
        self.mode = mode
        self.rng = np.random.default_rng(seed)
        self.rates: dict[str, float] = {}
        self.top_rate = 0.0  # the largest sampling rate an update was or may be at
        for wid, rate in (rates or {}).items():
            self.set_rate(wid, rate)
        self.steps = 0  # updates applied under the mechanism
        self.clipped = 0  # of them, scaled down to the clip norm (central only)
        self.steps_by_rate: dict[float, int] = {}
        self.steps_by_worker: dict[str, int] = {}

    def set_rate(self, worker_id: str, rate: float) -> None:
        """Record a worker's sampling rate (batch / shard), clamped to (0, 1]."""
        if not (math.isfinite(rate) and rate > 0):
            raise ValueError(f"sampling rate must be > 0, got {rate!r}")
        self.rates[worker_id] = min(1.0, float(rate))
        self.top_rate = max(self.top_rate, self.rates[worker_id])

    def count(self, worker_id: str) -> None:
        """One more applied update of ``worker_id``, at its sampling rate."""
        rate = self.rates.get(worker_id, 1.0)
        self.top_rate = max(self.top_rate, rate)
        self.steps += 1
        self.steps_by_rate[rate] = self.steps_by_rate.get(rate, 0) + 1
        self.steps_by_worker[worker_id] = self.steps_by_worker.get(worker_id, 0) + 1

    def busiest_by_rate(self) -> dict[float, int]:
        """Per sampling rate, the most updates one worker had applied at it.

        What the accountant needs for a record of one worker's shard: only
        that worker's updates can hold it, and epsilon grows with the count.
        """
        out: dict[float, int] = {}
        for wid, n in self.steps_by_worker.items():
            rate = self.rates.get(wid, 1.0)
            out[rate] = max(out.get(rate, 0), n)
        return out

    def apply(self, update: np.ndarray, worker_id: str) -> np.ndarray:
        """The update the PS applies: privatized (central) or as sent (local)."""
        self.count(worker_id)
        if self.mode == "local":
            return update
        out, clipped = privatize(update, self.clip, self.noise, self.rng)
        self.clipped += clipped
        return out


def dp_mechanism(
    mode: str,
    clip: float,
    noise: float,
    *,
    seed: int | None,
    rates: dict[str, float] | None = None,
) -> DPMechanism | None:
    """The mechanism for ``--dp MODE``; None for off."""
    check_dp(mode, clip, noise)
    if mode == "off":
        return None
    return DPMechanism(clip, noise, mode=mode, seed=seed, rates=rates)
