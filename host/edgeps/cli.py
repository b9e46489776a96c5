"""The `edgeps` command line: one subcommand per module, imported only when used.

Each command module exposes ``configure(parser)`` to add its flags and
``run(args) -> int`` to do the work, so `edgeps --help` stays fast and a
broken optional dependency only breaks the command that needs it.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from collections.abc import Sequence

from edgeps import __version__

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "info": (
        "edgeps.commands.info",
        "show versions and which kernel backend is active",
    ),
    "bench": ("edgeps.commands.bench", "run a benchmark (kernels, throughput, ...)"),
    "simulate": (
        "edgeps.commands.simulate",
        "compare sync policies in a discrete-event sim",
    ),
    "serve": ("edgeps.commands.serve", "run the host coordinator (parameter server)"),
    "worker": (
        "edgeps.commands.worker",
        "run a CPython worker (Raspberry Pi, any Linux box)",
    ),
    "emulate": (
        "edgeps.commands.emulate",
        "run N emulated sensor workers against a broker",
    ),
    "relay": (
        "edgeps.commands.relay",
        "serve one site's boards as one upstream worker",
    ),
    "export": (
        "edgeps.commands.export",
        "write a checkpoint's model as ONNX, a C header or JSON",
    ),
    "predict": (
        "edgeps.commands.predict",
        "predict with a model on a data file; score it when labelled",
    ),
    "plan": ("edgeps.commands.plan", "capacity plan: messages, bytes, CPU per tier"),
    "demo": (
        "edgeps.commands.demo",
        "embedded broker + host + 8 emulated sensors, end to end",
    ),
    "plot": ("edgeps.commands.plot", "draw metrics files: accuracy, rates, timeline"),
    "flash": ("edgeps.boards.flash", "flash MicroPython and the worker to an ESP32"),
    "deploy": ("edgeps.boards.deploy", "print install steps for a Raspberry Pi worker"),
    "keys": ("edgeps.commands.keys", "make a master key; derive per-device keys"),
    "broker-config": (
        "edgeps.commands.broker_config",
        "write a mosquitto config with per-worker users and ACLs",
    ),
}


def build_parser(
    selected: str | None, argv: Sequence[str] = ()
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgeps",
        description="Embedded edge learning: a parameter server for sensor boards.",
    )
    parser.add_argument("--version", action="version", version=f"edgeps {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == selected:
            module = importlib.import_module(module_name)
            if "argv" in inspect.signature(module.configure).parameters:
                module.configure(p, argv=list(argv))
            else:
                module.configure(p)
            p.set_defaults(_run=module.run, _parser=p)
    return parser


def _selected_command(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if arg in COMMANDS:
            return arg
        if not arg.startswith("-"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_selected_command(argv), argv)
    args, extra = parser.parse_known_args(argv)
    if extra:
        # a subcommand's mistake gets that subcommand's usage, not the top one
        own = getattr(args, "_parser", None) or parser
        own.error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
