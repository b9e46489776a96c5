"""`edgeps predict`: a model's predictions on a data file, scored when it has labels."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from edgeps.runtime.window_flags import add_window_flags


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  edgeps predict iris.npz --data new_flowers.csv\n"
        "  edgeps predict iris.onnx --data iris_test.csv --label species --json\n"
        "  edgeps predict hand.npz --data raw.csv --window 100 --stride 50\n"
        "A file one column wider than the model's features has labels (the "
        "last column, or --label): then the accuracy and a confusion matrix "
        "(R2 and MAE for a linear model) follow the predictions."
    )
    parser.add_argument("model", help="a checkpoint (.npz) or an export (.json, .onnx)")
    parser.add_argument("--data", required=True, help="CSV or NPZ of raw features")
    parser.add_argument("--label", help="the label column's name in a CSV")
    add_window_flags(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _load(path: str) -> Any:
    from edgeps.model.files import from_checkpoint, load_export
    from edgeps.runtime.checkpoint import load_checkpoint

    if Path(path).suffix.lower() == ".npz":
        ckpt = load_checkpoint(path)
        return from_checkpoint(ckpt.params, ckpt.meta, path)
    return load_export(path)[0]


def _read(path: str, label: str | None, model: Any, cut: Any) -> Any:
    from edgeps.model.table import read_table
    from edgeps.model.windows import check_fits
    from edgeps.pyworker.infer import model_channels

    classes = model.card.classes
    n = model.spec.n_features
    flags = cut.flags()
    if flags:
        flags["channels"] = model_channels(model.spec)
    try:
        table = read_table(path, label=label, classes=classes, n_features=n, **flags)
    except ValueError:
        if classes is None:
            raise
        # labels written as class ids rather than names
        table = read_table(path, label=label, n_features=n, **flags)
    check_fits(model.spec, table.shape, path)
    if table.n_features != n:
        raise ValueError(
            f"{path}: rows of {table.n_features} values, the model takes {n}"
            + ("" if flags else " (raw samples? give --window)")
        )
    return table


def _implicit_label(args: argparse.Namespace, table: Any) -> str | None:
    """What to say when a CSV's extra last column was taken as the labels
    without --label and its cells are not the model's class names: it may
    be something else (an id, a timestamp) scored as if it were labels."""
    if args.label is not None or table.y is None or table.classes is not None:
        return None
    if getattr(args, "window", None):
        return None  # raw samples cut into windows: the label column is required
    if Path(args.data).suffix.lower() == ".npz":
        return None  # its y array is labels by name
    n = table.n_features
    if table.feature_names is None:
        say = "give the file a header row and --label NAME"
    else:
        say = "--label NAME (the column's name in the header)"
    return (
        f"{args.data} has {n + 1} columns and the model takes {n} features: the "
        "last column is taken as the labels and scored against; if it is not "
        f"labels, drop it; if it is, {say} says so"
    )


def run(args: argparse.Namespace) -> int:
    from edgeps.model import scoring
    from edgeps.model.windows import Cut

    try:
        model = _load(args.model)
        cut = Cut(args.window, args.stride, args.group)
        table = _read(args.data, args.label, model, cut)
        note = _implicit_label(args, table)
        if note:
            print(f"edgeps predict: warning: {note}", file=sys.stderr)
        pred = model.predict(table.X)
        result: dict[str, Any] = {"model": str(model.spec), "rows": table.n_samples}
        linear = model.spec.kind == "linear"
        names = model.card.class_names()
        if linear:
            result["predictions"] = [float(v) for v in pred]
        else:
            result["predictions"] = [names[int(i)] for i in pred]
        if table.y is not None:
            if linear:
                result.update(scoring.regression(table.y, pred))
            else:
                result.update(scoring.classification(table.y, pred, names))
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"edgeps predict: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
        return 0
    for p in result["predictions"]:
        print(p if not linear else f"{p:.6g}")
    if "accuracy" in result:
        print(
            f"accuracy {result['accuracy']:.4f} on {table.n_samples} rows\n"
            + scoring.confusion_table(result),
            file=sys.stderr,
        )
    elif "r2" in result:
        print(
            f"R2 {result['r2']:.4f}, MAE {result['mae']:.6g} on {table.n_samples} rows",
            file=sys.stderr,
        )
    return 0
