"""Seeing a job diverge, from what the PS already counts, and backing its step off.

Fed once per evaluation: the running total of pushes refused as non-finite, the
held-out accuracy and whether the parameters are finite. A job is *diverging*
when several pushes turned non-finite since the last evaluation, or when its
accuracy fell well below its best for two evaluations in a row. Each time, unless
it backed off within the last ``cooldown`` evaluations, the step is multiplied by
``backoff``; once ``cooldown`` evaluations pass clean after a back-off the job is
*backed off*: learning again at a smaller step, which the user should start with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgeps.core.model_step import ModelStep

LEARNING = "learning"
DIVERGING = "diverging"
BACKED_OFF = "backed off"


@dataclass(frozen=True)
class Verdict:
    """What one evaluation showed: the state, why, and the step's share now."""

    state: str
    reason: str
    step_scale: float
    backed_off: bool  # the step was cut at this evaluation


class DivergenceWatch:
    """State machine over evaluations: learning -> diverging -> backed off."""

    def __init__(
        self,
        *,
        backoff: float = 0.5,
        min_non_finite: int = 3,
        accuracy_drop: float = 0.2,
        cooldown: int = 4,
        min_scale: float = 1.0 / 256,
    ) -> None:
        if not 0.0 < backoff <= 1.0:
            raise ValueError(f"backoff must be in (0, 1], got {backoff!r}")
        if min_non_finite < 1 or cooldown < 1:
            raise ValueError("min_non_finite and cooldown must be >= 1")
        self.backoff = float(backoff)
        self.min_non_finite = int(min_non_finite)
        self.accuracy_drop = float(accuracy_drop)
        self.cooldown = int(cooldown)
        self.min_scale = float(min_scale)
        self.state = LEARNING
        self.reason = ""
        self.step_scale = 1.0
        self.backoffs = 0
        self._seen: dict[str, int] = {}
        self._best: float | None = None
        self._low_evals = 0
        self._since_backoff: int | None = None  # evaluations since the last cut
        self._clean = 0  # evaluations in a row without a sign of divergence

    def check(
        self,
        *,
        non_finite_total: int,
        accuracy: float | None,
        params_finite: bool,
        applied_total: int = 0,
        outsized_total: int = 0,
    ) -> Verdict:
        """One evaluation's signals; returns the verdict (and cuts the step if due).

        The totals are running counts: pushes refused as non-finite, pushes
        applied, and pushes clipped to the norm bound (outsized).
        """
        new_non_finite = self._delta("non_finite", non_finite_total)
        new_applied = self._delta("applied", applied_total)
        new_outsized = self._delta("outsized", outsized_total)
        reason = self._sign(new_non_finite, accuracy, params_finite)
        if not reason and new_outsized >= self.min_non_finite + new_applied // 2:
            # most pushes outsized against the recent ones: the gradients grow
            reason = (
                f"{new_outsized} of {new_applied} pushes since the last evaluation "
                "were outsized (clipped)"
            )
        if self._since_backoff is not None:
            self._since_backoff += 1
        cut = False
        if reason:
            self._clean = 0
            self.state, self.reason = DIVERGING, reason
            due = self._since_backoff is None or self._since_backoff >= self.cooldown
            if due and self.backoff < 1.0 and self.step_scale > self.min_scale:
                self.step_scale = max(self.min_scale, self.step_scale * self.backoff)
                self.backoffs += 1
                self._since_backoff = 0
                self._best = None  # judge the smaller step on its own record
                self._low_evals = 0
                cut = True
        else:
            self._clean += 1
            if self.state == DIVERGING and self._clean >= self.cooldown:
                self.state = BACKED_OFF if self.backoffs else LEARNING
        return Verdict(self.state, self.reason, self.step_scale, cut)

    def steer(
        self,
        model: ModelStep,
        params: np.ndarray,
        *,
        accuracy: float | None,
        non_finite_total: int,
        applied_total: int,
    ) -> Verdict:
        """``check`` from what the model knows, and set its step to the verdict's."""
        verdict = self.check(
            non_finite_total=non_finite_total,
            accuracy=accuracy,
            params_finite=bool(np.isfinite(params).all()),
            applied_total=applied_total,
            outsized_total=model.clipped,
        )
        model.step_backoff = verdict.step_scale
        return verdict

    def _delta(self, name: str, total: int) -> int:
        before = self._seen.get(name, 0)
        self._seen[name] = max(before, int(total))
        return max(0, int(total) - before)

    def _sign(
        self, new_non_finite: int, accuracy: float | None, params_finite: bool
    ) -> str:
        if not params_finite:
            return "the parameters are no longer finite"
        if new_non_finite >= self.min_non_finite:
            return (
                f"{new_non_finite} pushes turned non-finite since the last evaluation"
            )
        if accuracy is None or not math.isfinite(accuracy):
            return ""
        if self._best is None or accuracy > self._best:
            self._best = accuracy
        if self._best - accuracy > self.accuracy_drop:
            self._low_evals += 1
        else:
            self._low_evals = 0
        if self._low_evals >= 2:
            return f"accuracy fell from {self._best:.3f} to {accuracy:.3f}"
        return ""

    def advice(self, lr: float) -> str:
        """One line for the user: what happened and what to change."""
        if self.state == LEARNING:
            return ""
        step = lr * self.step_scale
        did = (
            f"the step was backed off {self.backoffs}x to lr x {self.step_scale:g}"
            if self.backoffs
            else "the step was not changed"
        )
        return (
            f"job {self.state}: {self.reason}; {did}. "
            f"Start with --lr {step:.3g} (or a smaller --lr-workers)."
        )
