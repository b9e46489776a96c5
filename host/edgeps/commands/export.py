"""`edgeps export`: write a checkpoint's model (weights, scaler, class names) out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    from edgeps.model.writers import WRITERS

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = (
        "examples:\n"
        "  edgeps export iris.npz --format onnx --out iris.onnx\n"
        "  edgeps export iris.npz --format c --out firmware/main/iris_model.h\n"
        "  edgeps export iris.npz --format micropython --out model.bin\n"
        "formats:\n" + "\n".join(f"  {w.name:11} {w.help}" for w in WRITERS.values())
    )
    parser.add_argument("checkpoint", help="a checkpoint .npz written by serve")
    parser.add_argument(
        "--format", required=True, choices=sorted(WRITERS), help="what to write"
    )
    parser.add_argument(
        "--out", help="the file to write (default: the checkpoint's name, new suffix)"
    )


def run(args: argparse.Namespace) -> int:
    from edgeps.model import architecture
    from edgeps.model.files import from_checkpoint
    from edgeps.model.writers import WRITERS, export
    from edgeps.runtime.checkpoint import load_checkpoint

    src = Path(args.checkpoint)
    out = Path(args.out) if args.out else src.with_suffix(WRITERS[args.format].suffix)
    try:
        ckpt = load_checkpoint(src)
        model = from_checkpoint(ckpt.params, ckpt.meta, str(src))
        meta = {k: ckpt.meta.get(k) for k in ("job", "dataset", "policy", "accuracy")}
        meta["version"] = ckpt.version
        path = export(model, args.format, out, meta)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"edgeps export: error: {exc}", file=sys.stderr)
        return 2
    scaled = "scaled features" if model.card.scaler is not None else "raw features"
    info = architecture.describe(model.spec)
    print(
        f"edgeps export: {model.spec} ({scaled}, classes "
        f"{', '.join(model.card.class_names()) or '-'}) -> {path}\n"
        f"  {info['architecture']}; {architecture.size_text(info)}",
        file=sys.stderr,
    )
    return 0
