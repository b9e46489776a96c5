"""What a WELCOME tells each worker about the job beyond its session.

The job's local rounds (``LocalRounds``: SGD steps, epochs or seconds per
push, at the job's lr) and its card (the scaler every worker applies to its
features, the class names), as `edgeps_worker.wire_host.encode_welcome`
takes them (firmware/PROTOCOL.md, "WELCOME").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgeps.core.defaults import JOB
from edgeps.model.card import ModelCard


@dataclass(frozen=True)
class LocalRounds:
    """A worker's work per push: ``steps`` H (1: one gradient), or ``epochs``
    passes over its data, or ``seconds`` of training, of SGD at ``lr``."""

    steps: int = JOB.local_steps
    epochs: float = JOB.local_epochs
    seconds: float = JOB.local_time
    lr: float = JOB.lr

    @property
    def active(self) -> bool:
        """True when workers push deltas of several steps."""
        return self.steps > 1 or self.epochs > 0 or self.seconds > 0

    def welcome_fields(self) -> dict[str, Any]:
        """``encode_welcome``'s keywords; all zero-valued but H = 1 when off."""
        if not self.active:
            return {}
        return {
            "local_steps": int(self.steps),
            "local_epochs": float(self.epochs),
            "local_time": float(self.seconds),
            "lr": float(self.lr),
        }


def card_fields(card: ModelCard | None) -> dict[str, Any]:
    """``encode_welcome``'s ``scale`` and ``classes`` from the job's card."""
    if card is None:
        return {}
    out: dict[str, Any] = {}
    if card.scaler is not None:
        offset, inv = card.scaler.offset_scale()
        out["scale"] = (offset.tolist(), inv.tolist())
    if card.classes is not None:
        out["classes"] = list(card.classes)
    return out
