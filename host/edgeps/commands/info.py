"""`edgeps info [MODEL]`: versions, kernel backend and build; or a model's card.

With a checkpoint or an export it shows the model instead: spec, architecture
(layers with output shapes), parameters, MACs per sample, classes, scaler.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from edgeps.model.files import Predictor


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _selected(info: dict[str, str]) -> str:
    """In words: which copy of the kernels runs, and whether it was chosen."""
    running, isa = info.get("running", ""), info.get("isa", "unknown")
    if running == "avx2+fma":
        return "the AVX2+FMA copy, chosen at load time (this CPU has both)"
    if running == "baseline":
        return f"the baseline {isa} copy, chosen at load time"
    if running == "none":
        return f"the only copy, built for {isa}; nothing is chosen at load time"
    return "unknown (rebuild the extension)"


def _native_build() -> dict[str, str]:
    """What the C extension says about itself, or why it could not load."""
    try:
        from edgeps import _native
    except ImportError as exc:
        return {"native": f"unavailable: {exc}"}
    ffi, lib = _native.ffi, _native.lib
    if not hasattr(lib, "eps_build_info"):
        return {"native": "loaded (no build info: rebuild the extension)"}
    text = ffi.string(lib.eps_build_info()).decode()
    info = {"native": str(_native.__file__)}
    if hasattr(lib, "eps_dispatch_target"):
        info["running"] = ffi.string(lib.eps_dispatch_target()).decode()
    for part in text.split(";"):
        key, _, value = part.partition("=")
        if key:
            info[key.strip()] = value.strip()
    info["selected"] = _selected(info)
    return info


def collect() -> dict[str, Any]:
    """Everything `edgeps info` reports, as a JSON-ready dict."""
    import edgeps
    import edgeps.kernels as k

    return {
        "edgeps": edgeps.__version__,
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "platform": platform.platform(),
        "numpy": _version("numpy"),
        "cffi": _version("cffi"),
        "paho-mqtt": _version("paho-mqtt"),
        "kernel_backend": k.backend_name(),
        "kernel_backend_reason": k.backend_reason(),
        "native_build": _native_build(),
    }


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="?",
        help="a checkpoint (.npz) or an export (.json, .onnx, .bin): show its model",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")


def load_model(path: str | Path) -> tuple[Predictor, dict[str, Any]]:
    """A checkpoint (.npz: its version, job and accuracy as meta) or any export."""
    from edgeps.model.files import from_checkpoint, load_export

    if Path(path).suffix.lower() != ".npz":
        return load_export(path)
    from edgeps.runtime.checkpoint import load_checkpoint

    ckpt = load_checkpoint(path)
    meta = {k: ckpt.meta.get(k) for k in ("job", "dataset", "policy", "accuracy")}
    meta["version"] = ckpt.version
    return from_checkpoint(ckpt.params, ckpt.meta, str(path)), meta


def _model(args: argparse.Namespace) -> int:
    from edgeps.model import architecture

    try:
        model, meta = load_model(args.model)
        view = architecture.card_view(model.card, meta)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"edgeps info: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(view, indent=2) if args.json else architecture.card_text(view))
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "model", None):
        return _model(args)
    info = collect()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        if isinstance(value, dict):
            print(f"{key}:")
            for sub, text in value.items():
                print(f"  {sub:<{width}} {text}")
        else:
            print(f"{key:<{width}} {value}")
    return 0
