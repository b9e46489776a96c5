"""`edgeps bench models`: logistic, MLP and conv on the packaged datasets.

For MNIST-1D, BasicMotions, MNIST and Fashion-MNIST (each where installed)
and each of softmax regression (logistic when binary), an MLP and the
dataset's default conv network: the held-out accuracy of central training
(Adam, fixed epochs and lr per dataset, batch 32, seed 0; a training subset
where said), parameters, FLOPs per sample (2 x the forward multiply-adds),
the host's loss + gradient step at batch 32 with the C and numpy backends
(medians), the board's step and peak heap on the MicroPython unix port
(``edgeps.lab.bench.models_board``) and the accuracy 8 emulated sensors reach
under DSP on a real mosquitto (``edgeps.lab.bench.models_broker``). The
issue's goals are checked below the table (``edgeps.lab.bench.models_table``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec, get_backend
from edgeps.lab.bench.models_table import MODELS, ModelRow, goals, table


@dataclasses.dataclass(frozen=True)
class Plan:
    """How one dataset is trained centrally: epochs per model, lr, training subset."""

    epochs: dict[str, int]
    lr: float = 0.003
    train_limit: int = 0  # 0: the whole training split
    mlp: str = "mlp:32"


PLANS = {
    "mnist1d": Plan({"logistic": 20, "mlp": 20, "conv": 20}),
    "basicmotions": Plan({"logistic": 30, "mlp": 30, "conv": 30}),
    "mnist": Plan({"logistic": 10, "mlp": 10, "conv": 10}, mlp="mlp:64"),
    "fashion-mnist": Plan({"logistic": 5, "mlp": 5, "conv": 5}, mlp="mlp:64"),
}
QUICK = {"train": 256, "test": 200, "epochs": 1}
BATCH = 32
BOARD_BATCH = 16  # a board job's batch (firmware config default)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", default=",".join(PLANS), help="comma-separated")
    parser.add_argument("--repeat", type=int, default=9, help="timed steps (median)")
    parser.add_argument(
        "--quick", action="store_true", help="a test-sized subset and one epoch"
    )
    parser.add_argument("--no-board", action="store_true", help="skip MicroPython")
    parser.add_argument(
        "--sensors-datasets",
        default="mnist1d,basicmotions",
        help="datasets run with emulated sensors on a broker ('' for none)",
    )
    parser.add_argument("--sensors", type=int, default=8, help="emulated sensors")
    parser.add_argument("--max-time", type=float, default=90.0, help="s per broker job")
    parser.add_argument(
        "--compute-time",
        type=float,
        default=0.01,
        help="emulated sensors' base step, s (scaled by the model's FLOPs)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def _split(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def model_specs(ds: Any, mlp: str) -> dict[str, str]:
    """The full spec of each row's model for dataset ``ds``."""
    from edgeps.runtime.model_forms import complete_model

    nf, nc = int(ds.X_train.shape[1]), int(ds.n_classes)
    linear = "logistic" if nc == 2 else "softmax"
    return {
        "logistic": complete_model(linear, nf, nc),
        "mlp": complete_model(mlp, nf, nc),
        "conv": ds.model_spec,
    }


def train(
    spec: ModelSpec, X: np.ndarray, y: np.ndarray, epochs: int, lr: float
) -> np.ndarray:
    """Central Adam training, batch 32, seed 0; the fastest backend there is."""
    K = _backend("c") or get_backend("numpy")
    p = spec.init_params(0)
    m, v = np.zeros_like(p), np.zeros_like(p)
    g = np.empty_like(p)
    rng, t = np.random.default_rng(0), 0
    for _ in range(epochs):
        for b in np.array_split(rng.permutation(len(y)), max(1, len(y) // BATCH)):
            t += 1
            K.loss_and_grad(spec, p, X[b], y[b], g)
            K.adam_step(p, g, m, v, t, lr)
    return p


def _backend(name: str) -> Any:
    try:
        return get_backend(name)
    except (ImportError, OSError, AttributeError):
        return None


def step_ms(
    name: str, spec: ModelSpec, X: np.ndarray, y: np.ndarray, repeat: int
) -> float | None:
    """Median ms of a loss + gradient at batch 32 on backend ``name`` (None: absent)."""
    K = _backend(name)
    if K is None:
        return None
    p = spec.init_params(1)
    g = np.empty_like(p)
    xb, yb = X[:BATCH], y[:BATCH]
    K.loss_and_grad(spec, p, xb, yb, g)
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        K.loss_and_grad(spec, p, xb, yb, g)
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def dataset_rows(name: str, args: Any, progress: Any = None) -> list[ModelRow]:
    """The three rows of one dataset, host and board columns filled."""
    from edgeps.lab.bench.models_board import board_step
    from edgeps.workloads.datasets import load_dataset

    plan = PLANS[name]
    ds = load_dataset(name, 0)
    X, y, X_te, y_te = ds.X_train, ds.y_train, ds.X_test, ds.y_test
    limit = QUICK["train"] if args.quick else plan.train_limit
    if limit:
        X, y = X[:limit], y[:limit]
    if args.quick:
        X_te, y_te = X_te[: QUICK["test"]], y_te[: QUICK["test"]]
    rows = []
    for model, text in model_specs(ds, plan.mlp).items():
        spec = ModelSpec.parse(text)
        epochs = QUICK["epochs"] if args.quick else plan.epochs[model]
        row = ModelRow(name, model, text, spec.n_params, 2 * spec.macs, epochs)
        t0 = time.monotonic()
        p = train(spec, X, y, epochs, plan.lr)
        row.train_seconds = round(time.monotonic() - t0, 1)
        row.accuracy = (_backend("c") or get_backend("numpy")).accuracy(
            spec, p, X_te, y_te
        )
        row.c_ms = step_ms("c", spec, X, y, args.repeat)
        row.numpy_ms = step_ms("numpy", spec, X, y, args.repeat)
        if not args.no_board:
            board = board_step(text, BOARD_BATCH, args.repeat)
            row.board_ms, row.board_peak = board["ms"], board["peak"]
            row.board_note = board["note"]
        rows.append(row)
        if progress is not None:
            progress(f"{name} {model}: accuracy {row.accuracy:.3f}")
    return rows


def sensors_columns(rows: list[ModelRow], args: Any, progress: Any = None) -> None:
    """Fill the sensors column of the rows of --sensors-datasets, one job each."""
    chosen = [r for r in rows if r.dataset in _split(args.sensors_datasets)]
    if not chosen:
        return
    try:
        _sensor_jobs(chosen, args, progress)
    except (OSError, RuntimeError) as exc:  # no mosquitto: the other columns stand
        for r in chosen:
            if r.sensors_accuracy is None and not r.sensors_note:
                r.sensors_note = f"no broker: {exc}"


def _sensor_jobs(chosen: list[ModelRow], args: Any, progress: Any) -> None:
    from edgeps.lab.bench.models_broker import note_of, sensors_run
    from edgeps.lab.bench.models_table import SENSORS_GOAL
    from edgeps.transport.broker import start_mosquitto

    with (
        tempfile.TemporaryDirectory(prefix="edgeps-bm-") as tmp,
        start_mosquitto() as b,
    ):
        for n, r in enumerate(chosen):
            result = sensors_run(
                b.url, f"bm{n}", r.dataset, r.spec, Path(tmp),
                workers=args.sensors, max_time=args.max_time, target=SENSORS_GOAL,
                compute_time=args.compute_time,
            )  # fmt: skip
            r.sensors_accuracy = result["accuracy"]
            r.sensors_note = note_of(result)
            if progress is not None:
                progress(f"{r.dataset} {r.model} on the broker: {r.sensors_note}")


def measure(args: Any, progress: Any = None) -> tuple[list[ModelRow], list[str]]:
    """Every row; and the datasets skipped, with why."""
    rows: list[ModelRow] = []
    skipped: list[str] = []
    for name in _split(args.datasets):
        try:
            rows += dataset_rows(name, args, progress)
        except ValueError as exc:
            skipped.append(f"{name}: {exc}")
    if _split(args.sensors_datasets):
        sensors_columns(rows, args, progress)
    return rows, skipped


def _check(args: Any) -> None:
    for name in _split(args.datasets) + _split(args.sensors_datasets):
        if name not in PLANS:
            raise ValueError(f"unknown dataset {name!r}; known: {', '.join(PLANS)}")
    if args.repeat < 1 or args.sensors < 1 or args.max_time <= 0:
        raise ValueError("--repeat and --sensors must be >= 1, --max-time > 0")


def _note(text: str) -> None:
    print(f"  {text}", file=sys.stderr, flush=True)


def header(args: Any) -> str:
    """What the columns are, printed above the table."""
    plans = "; ".join(
        f"{n} " + "/".join(f"{p.epochs[m]}" for m in MODELS)
        + (f" on the first {p.train_limit}" if p.train_limit else "")
        for n, p in PLANS.items()
    )  # fmt: skip
    quick = " QUICK: 256 training rows, 200 test rows, 1 epoch." if args.quick else ""
    return (
        "acc: held-out accuracy of central training (Adam lr 0.003, batch 32, "
        f"seed 0; epochs logistic/mlp/conv: {plans}).{quick}\n"
        "FLOPs: per sample forward (2 x multiply-adds). C ms / np ms: loss + "
        f"gradient at batch {BATCH}, median of {args.repeat}.\n"
        f"board ms: the same step at batch {BOARD_BATCH} under MicroPython (unix "
        "port) in a 96K heap; board heap: its peak (64-bit unix port).\n"
        f"8 sensors: held-out accuracy of {args.sensors} emulated sensors under DSP "
        "(the server's Adam, lr 0.003) "
        f"on a real mosquitto, stopped at 0.90 or {args.max_time:g} s (base step "
        f"{args.compute_time:g} s x FLOPs per parameter)."
    )


def run(args: argparse.Namespace) -> int:
    try:
        _check(args)
        started = time.monotonic()
        rows, skipped = measure(args, progress=_note)
    except (ValueError, OSError, RuntimeError) as exc:
        print(f"edgeps bench models: {exc}", file=sys.stderr)
        return 2
    checked = goals(rows)
    wall = round(time.monotonic() - started, 1)
    if args.json:
        config = {k: v for k, v in vars(args).items() if not k.startswith("_")}
        out = {
            "config": config,
            "rows": [r.to_dict() for r in rows],
            "goals": [dataclasses.asdict(g) for g in checked],
            "skipped": skipped,
            "wall_seconds": wall,
        }
        print(json.dumps(out))
        return 0 if rows else 1
    print(header(args))
    print(table(rows))
    for line in skipped:
        print(f"skipped {line}")
    print("goals:")
    for g in checked:
        print(g.line())
    print(f"{wall:.0f} s wall")
    return 0 if rows else 1
