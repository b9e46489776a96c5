"""The privacy budget spent so far: epsilon at a given delta, from an RDP accountant.

The core counts the updates it applied under differential privacy, by
sampling rate (``edgeps.core.privacy.DPMechanism``); this module composes
them with the RDP accountant of Google's ``dp-accounting`` package (Mironov,
"Renyi Differential Privacy", CSF 2017): one Poisson-subsampled Gaussian event
per applied update, at the update's sampling rate q (batch / samples of the
worker's shard; 1 when the PS does not know the shard) and noise multiplier
sigma.

The update is clipped as a whole, not example by example as in DP-SGD: one
record added to or removed from a batch can move the clipped update anywhere
in the ball of radius C, by up to 2C. The accountant therefore composes
Gaussian events of noise multiplier sigma / 2 (``SENSITIVITY``), which is
what the noise sigma x C is worth against a change of 2C.

``epsilon`` composes every applied update, whichever worker sent it: the
bound holds however the workers' data overlap (all reading one file).
``epsilon_per_shard`` composes only one worker's updates (the busiest at each
sampling rate): the bound for a record that lives on one worker's shard only,
when every worker id trains on its own disjoint shard. The budget is checked
against ``epsilon``.

``dp-accounting`` is an optional extra (``pip install 'edgeps[privacy]'``),
imported only when a job runs with differential privacy.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from edgeps.core.privacy import DPMechanism

INSTALL_HINT = (
    "differential privacy needs the dp-accounting package: "
    "pip install 'edgeps[privacy]'"
)
DEFAULT_DELTA = 1e-5
SENSITIVITY = 2.0  # in units of C: how far one record can move a clipped update


def require_accountant() -> None:
    """RuntimeError with the one-line install hint when dp-accounting is missing."""
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        raise RuntimeError(INSTALL_HINT) from None


def epsilon(sigma: float, steps_by_rate: dict[float, int], delta: float) -> float:
    """Epsilon at ``delta`` after ``steps_by_rate[q]`` subsampled Gaussian events at q.

    ``sigma`` is the events' noise multiplier (the ledger passes the job's
    sigma / ``SENSITIVITY``). No event: 0. No noise: infinity.
    """
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    steps = {q: n for q, n in steps_by_rate.items() if n > 0}
    if not steps:
        return 0.0
    if sigma <= 0:
        return math.inf
    try:
        import dp_accounting
    except ImportError:
        raise RuntimeError(INSTALL_HINT) from None
    accountant = dp_accounting.rdp.RdpAccountant()
    # dp-accounting logs (through absl) each fractional order whose series
    # does not converge at small q, and leaves that order out: not news
    absl = logging.getLogger("absl")
    level = absl.level
    absl.setLevel(logging.ERROR)
    try:
        for rate, count in sorted(steps.items()):
            event: Any = dp_accounting.GaussianDpEvent(sigma)
            if rate < 1.0:
                event = dp_accounting.PoissonSampledDpEvent(rate, event)
            accountant.compose(event, count)
        return float(accountant.get_epsilon(delta))
    finally:
        absl.setLevel(level)


class PrivacyLedger:
    """Reports a mechanism's spent budget, cached per count of applied updates.

    ``budget``: the epsilon at which the job should stop; None: no limit.
    """

    def __init__(self, delta: float = DEFAULT_DELTA, budget: float | None = None):
        if not 0 < delta < 1:
            raise ValueError(f"--dp-delta must be in (0, 1), got {delta!r}")
        if budget is not None and not (math.isfinite(budget) and budget > 0):
            raise ValueError(f"--dp-epsilon-budget must be > 0, got {budget!r}")
        require_accountant()
        self.delta = float(delta)
        self.budget = budget
        self._cache: dict[str, tuple[tuple[tuple[float, int], ...], float]] = {}
        self._limits: dict[tuple[float, float], int] = {}

    def _eps(self, name: str, sigma: float, steps: dict[float, int]) -> float:
        key = tuple(sorted(steps.items()))
        hit = self._cache.get(name)
        if hit is None or hit[0] != key:
            hit = self._cache[name] = (key, epsilon(sigma, steps, self.delta))
        return hit[1]

    def epsilon(self, mech: DPMechanism) -> float:
        """Every applied update composed (any overlap of the workers' data)."""
        return self._eps("all", mech.noise / SENSITIVITY, mech.steps_by_rate)

    def epsilon_per_shard(self, mech: DPMechanism) -> float:
        """One worker's updates composed: a record on one disjoint shard."""
        return self._eps("shard", mech.noise / SENSITIVITY, mech.busiest_by_rate())

    def report(self, mech: DPMechanism) -> dict[str, Any]:
        """``{epsilon, epsilon_per_shard, delta, sigma, clip, steps, mode, budget}``."""
        return {
            "epsilon": self.epsilon(mech),
            "epsilon_per_shard": self.epsilon_per_shard(mech),
            "delta": self.delta,
            "sigma": mech.noise,
            "clip": mech.clip,
            "steps": mech.steps,
            "mode": mech.mode,
            "budget": self.budget,
        }

    def step_limit(self, sigma: float, rate: float) -> int:
        """The most updates at sampling ``rate`` whose epsilon stays within the budget.

        Epsilon grows with the count and with the rate, so a job whose updates
        are at rates up to ``rate`` is within the budget while it has applied
        no more than this many.
        """
        budget = self.budget
        if budget is None:
            raise ValueError("no budget")
        key = (sigma, rate)
        if key not in self._limits:

            def within(n: int) -> bool:
                return epsilon(sigma / SENSITIVITY, {rate: n}, self.delta) <= budget

            low, high = 0, 1  # within(low); find a high that is not
            while within(high) and high < 1 << 40:
                low, high = high, high * 2
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if within(mid) else (low, mid)
            self._limits[key] = low
        return self._limits[key]

    def spent(self, mech: DPMechanism) -> bool:
        """True once one more update could take epsilon past the budget.

        Cheap after the first call at a given sigma and top sampling rate: a
        job may ask after every message.
        """
        if self.budget is None:
            return False
        rate = mech.top_rate if mech.top_rate > 0 else 1.0
        return mech.steps >= self.step_limit(mech.noise, rate)


def make_ledger(mode: str, delta: float, budget: float) -> PrivacyLedger | None:
    """The accountant for ``--dp MODE`` (budget 0: no limit); None for off.

    Raises RuntimeError with the install hint when dp-accounting is missing.
    """
    if mode == "off":
        return None
    return PrivacyLedger(delta, budget if budget > 0 else None)


def privacy_line(report: dict[str, Any] | None) -> str:
    """The summary's line: 'privacy (central): epsilon 1.23 at delta 1e-05, ...'."""
    if not report:
        return ""

    def shown(eps: Any) -> str:
        return "inf" if eps is None or not math.isfinite(eps) else f"{eps:.3g}"

    line = (
        f"privacy ({report.get('mode')}): epsilon {shown(report.get('epsilon'))} "
        f"({shown(report.get('epsilon_per_shard'))} per disjoint shard) at delta "
        f"{report.get('delta'):g}, sigma {report.get('sigma'):g}, clip "
        f"{report.get('clip'):g}, {report.get('steps')} updates"
    )
    if report.get("budget") is not None:
        line += f", budget {report['budget']:g}"
    return line
