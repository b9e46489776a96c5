"""`edgeps bench NAME`: each benchmark prints a table, or JSON with --json."""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help); each module has configure(parser) and run(args)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "kernels": ("edgeps.lab.bench.kernels", "C vs numpy kernel timings"),
    "conv": (
        "edgeps.lab.bench.conv",
        "conv kernels: C vs numpy vs PyTorch, per step and per layer",
    ),
    "core": ("edgeps.lab.bench.core", "PS core pushes/s per sync policy, no network"),
    "throughput": (
        "edgeps.lab.bench.throughput",
        "PS updates/s vs raw broker echo rate",
    ),
    "policies": (
        "edgeps.lab.matrix.goals",
        "sync policies in the simulator, with DSP's goals checked",
    ),
    "rounds": (
        "edgeps.lab.bench.round_bound",
        "BSP round time: slowest board, balanced or not",
    ),
    "fw-publish": (
        "edgeps.lab.bench.fw_publish",
        "QoS1 publish rate of the firmware MQTT client under MicroPython",
    ),
    "fw-kernels": (
        "edgeps.lab.bench.fw_kernels",
        "board kernels: MicroPython vs numpy",
    ),
    "fw-conv": (
        "edgeps.lab.bench.fw_conv",
        "board conv1d step under MicroPython, per FLOP against the MLP",
    ),
    "fw-feedback": (
        "edgeps.lab.bench.fw_feedback",
        "board UPDATE codecs' accuracy cost",
    ),
    "links": (
        "edgeps.lab.bench.links",
        "bytes through a shaped link vs bytes * 8 / rate",
    ),
    "relay": ("edgeps.lab.bench.relay", "central message rate with and without relays"),
    "compression": (
        "edgeps.lab.bench.compression",
        "uplink codecs on 250 kbit/s links",
    ),
    "scale": ("edgeps.lab.bench.scale", "N emulated sensors at 1 update/s: rates, CPU"),
    "privacy": (
        "edgeps.lab.bench.privacy",
        "differential privacy in the simulator: accuracy, time to target, epsilon",
    ),
    "predict": (
        "edgeps.lab.bench.predict",
        "one prediction's time and memory: C, numpy, onnxruntime, MicroPython",
    ),
    "policies-broker": (
        "edgeps.lab.bench.policies_broker",
        "a slice of the policy matrix on a real broker, next to the simulator",
    ),
    "disturb": (
        "edgeps.lab.bench.disturb",
        "a real worker's step time next to a real CPU competitor, vs the profile",
    ),
    "local": (
        "edgeps.lab.bench.local",
        "local rounds on a real broker: bytes, seconds and joules per board",
    ),
    "byzantine": (
        "edgeps.lab.bench.byzantine",
        "1 or 2 of 8 workers lying, per policy: accuracy and time vs a clean run",
    ),
    "paper": (
        "edgeps.lab.bench.paper",
        "the DSP paper's experiment: LeNet-5, real workers, one disturbed",
    ),
    "models": (
        "edgeps.lab.bench.models",
        "logistic, MLP and conv on the packaged datasets: accuracy, cost, board",
    ),
}


def configure(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    sub = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    for name, (module_name, help_text) in BENCHMARKS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_bench_module=module_name, _parser=p)
        if name in argv:
            # only the chosen benchmark's module is imported
            importlib.import_module(module_name).configure(p)


def run(args: argparse.Namespace) -> int:
    module = importlib.import_module(args._bench_module)
    result: int = module.run(args)
    return result
