"""`edgeps bench models`' rows, goals and table: pure, so they are unit-tested."""

from __future__ import annotations

import dataclasses
from typing import Any

MODELS = ("logistic", "mlp", "conv")
SENSORS_GOAL = 0.90  # MNIST-1D conv across 8 sensors
LENET_GOAL = 0.95  # LeNet-5 on the MNIST subset's held-out part
C_SPEEDUP_GOAL = 3.0  # C conv training step over numpy's
BOARD_PER_FLOP_GOAL = 10.0  # board conv1d time per FLOP over its MLP's


@dataclasses.dataclass
class ModelRow:
    """One (dataset, model) row; None where a column was not measured."""

    dataset: str
    model: str  # "logistic" (softmax when multiclass), "mlp" or "conv"
    spec: str
    params: int
    flops: int  # per sample, forward: 2 x multiply-adds
    epochs: int = 0
    accuracy: float | None = None
    train_seconds: float | None = None
    c_ms: float | None = None
    numpy_ms: float | None = None
    board_ms: float | None = None
    board_peak: int | None = None
    board_note: str = ""
    sensors_accuracy: float | None = None
    sensors_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Goal:
    """One goal of the benchmark: met, missed (by ``short``) or not measured."""

    name: str
    value: str  # what was measured, as printed
    met: bool | None  # None: not measured
    short: str = ""  # how far from the goal, when missed
    why: str = ""

    def line(self) -> str:
        mark = {True: "met", False: "MISSED", None: "not measured"}[self.met]
        text = f"  [{mark}] {self.name}: {self.value}"
        if self.met is False and self.short:
            text += f" (short by {self.short})"
        return text + (f"; {self.why}" if self.why else "")


def _find(rows: list[ModelRow], dataset: str, model: str) -> ModelRow | None:
    return next((r for r in rows if r.dataset == dataset and r.model == model), None)


def _accuracy_goal(name: str, value: float | None, goal: float, why: str) -> Goal:
    if value is None:
        return Goal(name, "-", None, why=why)
    met = value >= goal
    return Goal(name, f"{value:.3f}", met, "" if met else f"{goal - value:.3f}")


def goals(rows: list[ModelRow]) -> list[Goal]:
    """The issue's goals checked against the measured rows."""
    out: list[Goal] = []
    conv1d = _find(rows, "mnist1d", "conv")
    out.append(
        _accuracy_goal(
            f"MNIST-1D conv across 8 sensors >= {SENSORS_GOAL:g}",
            None if conv1d is None else conv1d.sensors_accuracy,
            SENSORS_GOAL,
            "" if conv1d is None else conv1d.sensors_note,
        )
    )
    mlp1d = _find(rows, "mnist1d", "mlp")
    if mlp1d is not None:
        acc = mlp1d.sensors_accuracy
        central = "-" if mlp1d.accuracy is None else f"{mlp1d.accuracy:.3f}"
        sensors = "-" if acc is None else f"{acc:.3f}"
        out.append(
            Goal(
                "MNIST-1D MLP near 0.6-0.7 (for comparison)",
                f"{sensors} across sensors, {central} central",
                None if acc is None else 0.55 <= acc <= 0.75,
            )
        )
    lenet = _find(rows, "mnist", "conv")
    out.append(
        _accuracy_goal(
            f"LeNet-5 on the MNIST subset >= {LENET_GOAL:g} (held out)",
            None if lenet is None else lenet.accuracy,
            LENET_GOAL,
            "",
        )
    )
    out.append(_basicmotions_goal(rows))
    out.append(_speedup_goal(rows))
    out.append(_board_goal(rows))
    return out


def _basicmotions_goal(rows: list[ModelRow]) -> Goal:
    name = "BasicMotions conv above the best MLP"
    conv = _find(rows, "basicmotions", "conv")
    mlps = [
        r.accuracy for r in rows if r.dataset == "basicmotions" and r.model == "mlp"
    ]
    best = max((a for a in mlps if a is not None), default=None)
    if conv is None or conv.accuracy is None or best is None:
        return Goal(name, "-", None)
    met = conv.accuracy > best
    short = "" if met else f"{best - conv.accuracy:.3f}"
    return Goal(name, f"conv {conv.accuracy:.3f} vs MLP {best:.3f}", met, short)


def _speedup_goal(rows: list[ModelRow]) -> Goal:
    """The slowest C conv step's speed-up over numpy, across the datasets."""
    name = f"C conv training step >= {C_SPEEDUP_GOAL:g}x numpy"
    pairs = [
        (r.numpy_ms / r.c_ms, r.dataset)
        for r in rows
        if r.model == "conv" and r.c_ms and r.numpy_ms
    ]
    if not pairs:
        return Goal(name, "-", None)
    worst, where = min(pairs)
    every = ", ".join(f"{d} {x:.1f}x" for x, d in pairs)
    met = worst >= C_SPEEDUP_GOAL
    short = "" if met else f"{C_SPEEDUP_GOAL / worst:.1f}x on {where}"
    return Goal(name, every, met, short)


def _board_goal(rows: list[ModelRow]) -> Goal:
    """Board conv1d time per FLOP over the same dataset's MLP's, worst dataset."""
    name = f"board conv1d step within {BOARD_PER_FLOP_GOAL:g}x of its MLP per FLOP"
    ratios = []
    for conv in rows:
        if conv.model != "conv" or not conv.spec.startswith("conv1d"):
            continue
        mlp = _find(rows, conv.dataset, "mlp")
        if mlp is None or not conv.board_ms or not mlp.board_ms:
            continue
        per_flop = (conv.board_ms / conv.flops) / (mlp.board_ms / mlp.flops)
        ratios.append((per_flop, conv.dataset))
    if not ratios:
        return Goal(name, "-", None)
    worst, where = max(ratios)
    every = ", ".join(f"{d} {x:.1f}x" for x, d in ratios)
    met = worst <= BOARD_PER_FLOP_GOAL
    short = "" if met else f"{worst / BOARD_PER_FLOP_GOAL:.1f}x on {where}"
    return Goal(name, every, met, short)


def _num(value: float | int | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _board(r: ModelRow) -> tuple[str, str]:
    ms = "-" if r.board_ms is None else f"{r.board_ms:.1f}"
    peak = "-" if r.board_peak is None else f"{r.board_peak / 1024:.0f}K"
    return ms, peak


HEADER = (
    f"{'dataset':<13} {'model':<8} {'params':>7} {'FLOPs':>9} {'ep':>3} "
    f"{'acc':>6} {'C ms':>8} {'np ms':>8} {'np/C':>5} {'board ms':>9} "
    f"{'board heap':>10} {'8 sensors':>9}"
)


def table(rows: list[ModelRow]) -> str:
    """The fixed-width table, one line per row; notes for unmeasured cells below."""
    lines = [HEADER]
    notes: list[str] = []
    for r in rows:
        ratio = r.numpy_ms / r.c_ms if r.c_ms and r.numpy_ms else None
        board_ms, heap = _board(r)
        if r.board_note:
            heap = f"{'' if heap == '-' else heap}[{len(notes) + 1}]"
            notes.append(f"[{len(notes) + 1}] {r.dataset} {r.model}: {r.board_note}")
        sensors = _num(r.sensors_accuracy, ".3f")
        if r.sensors_accuracy is None and r.sensors_note:
            sensors = f"[{len(notes) + 1}]"
            notes.append(f"[{len(notes) + 1}] {r.dataset} {r.model}: {r.sensors_note}")
        lines.append(
            f"{r.dataset:<13} {r.model:<8} {r.params:>7} {r.flops:>9} "
            f"{r.epochs:>3} {_num(r.accuracy, '.3f'):>6} {_num(r.c_ms, '.3f'):>8} "
            f"{_num(r.numpy_ms, '.3f'):>8} {_num(ratio, '.1f'):>5} {board_ms:>9} "
            f"{heap:>10} {sensors:>9}"
        )
    specs = [f"  {r.dataset} {r.model}: {r.spec}" for r in rows]
    return "\n".join([*lines, *notes, "specs:", *specs])
