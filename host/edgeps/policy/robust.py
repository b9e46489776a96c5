"""Byzantine-robust ways to combine a round's updates into one step.

``mean``: the sample-weighted mean (FedAvg). ``median``: the coordinate-wise
median (Yin et al., "Byzantine-Robust Distributed Learning: Towards Optimal
Statistical Rates", ICML 2018). ``trim:F``: the coordinate-wise trimmed mean,
dropping the fraction F of values at each end of every coordinate (same
paper); a round of fewer than 1 / F updates has nothing to cut and is
combined as the weighted mean (of claims the core caps). The median and the
trimmed mean ignore the samples each push counts: a worker may claim any
count, and a robust rule must not let it.
"""

from __future__ import annotations

import math

import numpy as np

RULES = ("mean", "median", "trim:F")
# the rule every aggregating policy uses unless told: with f of N workers
# lying, f < N/4 (the bound trimmed-mean results assume), a quarter cut at
# each end of every coordinate removes every liar's value
DEFAULT_RULE = "trim:0.25"


def parse_rule(text: str) -> tuple[str, float]:
    """("mean" | "median" | "trim", the trimmed fraction); ValueError otherwise."""
    if text in ("mean", "median"):
        return text, 0.0
    if text.startswith("trim:"):
        try:
            frac = float(text[5:])
        except ValueError:
            frac = math.nan
        if not 0.0 < frac < 0.5:
            raise ValueError(f"agg trim:F needs 0 < F < 0.5, got {text!r}")
        return "trim", frac
    raise ValueError(f"agg must be one of {', '.join(RULES)}, got {text!r}")


def combine(
    deltas: list[np.ndarray], weights: list[float], rule: str, frac: float = 0.0
) -> np.ndarray:
    """One float32 update from a round's (clipped) deltas under ``rule``."""
    if not deltas:
        raise ValueError("no updates to combine")
    stack = np.stack([d.astype(np.float64) for d in deltas])
    n = stack.shape[0]
    cut = int(math.floor(frac * n)) if rule == "trim" else 0
    if rule == "mean" or (rule == "trim" and cut == 0):
        # a round too small to cut anything from is the weighted mean
        w = np.asarray(weights, np.float64)
        return (w @ stack / w.sum()).astype(np.float32)
    if rule == "median":
        return np.median(stack, axis=0).astype(np.float32)
    if rule == "trim":
        if n - 2 * cut < 1:
            cut = (n - 1) // 2
        ordered = np.sort(stack, axis=0)
        return ordered[cut : n - cut].mean(axis=0).astype(np.float32)
    raise ValueError(f"unknown rule {rule!r}")
