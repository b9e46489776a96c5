"""The sensors column of `edgeps bench models`: 8 emulated sensors on a real broker.

A real `edgeps serve --dataset D --model SPEC --policy dsp` (server-side Adam,
lr 0.003) and `edgeps
emulate --workers N --dataset D` (two processes, as `edgeps bench
policies-broker` runs them) on a private mosquitto on 127.0.0.1, bounded by
``--max-time``; serve's JSON gives the held-out accuracy it ended with. The
emulated sensors compute real gradients; their step time is the emulator's
base time (``--compute-time``) scaled by the model's FLOPs per parameter.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from edgeps.lab.bench.procs import edgeps, stop, tail

LR = 0.003  # the server's Adam: SGD's default 0.1 diverges on the conv nets


def sensors_run(
    url: str,
    job: str,
    dataset: str,
    spec: str,
    workdir: Path,
    *,
    workers: int,
    max_time: float,
    target: float,
    compute_time: float,
    seed: int = 0,
) -> dict[str, Any]:
    """One serve + emulate job; ``accuracy`` (or None), ``elapsed``, ``updates``,
    ``stop_reason`` and ``error``."""
    serve_cmd = edgeps(
        "serve", "--broker", url, "--job", job, "--policy", "dsp",
        "--dataset", dataset, "--model", spec, "--seed", str(seed),
        "--optimizer", "adam", "--lr", str(LR),
        "--target-accuracy", str(target), "--max-time", str(max_time),
        "--json", "--quiet",
    )  # fmt: skip
    emu_cmd = edgeps(
        "emulate", "--broker", url, "--job", job, "--workers", str(workers),
        "--dataset", dataset, "--seed", str(seed),
        "--compute-time", str(compute_time), "--max-time", str(max_time + 30),
    )  # fmt: skip
    serve_err, emu_err = workdir / f"{job}.serve.err", workdir / f"{job}.emulate.err"
    result: dict[str, Any] = {"accuracy": None, "error": ""}
    serve = emu = None
    try:
        with serve_err.open("wb") as se, emu_err.open("wb") as ee:
            serve = subprocess.Popen(serve_cmd, stdout=subprocess.PIPE, stderr=se)
            # the sensors wait for the job's retained MODEL: no head start needed
            emu = subprocess.Popen(emu_cmd, stdout=subprocess.DEVNULL, stderr=ee)
            try:
                out, _ = serve.communicate(timeout=max_time + 60)
            except subprocess.TimeoutExpired:
                serve.kill()
                out, _ = serve.communicate(timeout=10)
                result["error"] = "serve did not end in --max-time + 60 s (killed)"
            stop(emu, 30 if serve.returncode == 0 else 0.5)
    finally:
        for p in (emu, serve):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
    if not result["error"] and serve is not None and serve.returncode != 0:
        result["error"] = f"serve exited {serve.returncode}: {tail(serve_err, 2)}"
    if result["error"]:
        return result
    try:
        summary = json.loads(out)
    except ValueError:
        result["error"] = "serve printed no JSON summary"
        return result
    acc = summary.get("accuracy")
    result["accuracy"] = float(acc) if isinstance(acc, (int, float)) else None
    result["elapsed"] = summary.get("elapsed")
    result["updates"] = int(summary.get("updates", 0))
    result["stop_reason"] = str(summary.get("stop_reason", ""))
    return result


def note_of(result: dict[str, Any]) -> str:
    """What the table says of a run: its stop, time and updates, or its error."""
    if result.get("error"):
        return f"failed: {result['error']}"
    elapsed = result.get("elapsed")
    when = "-" if not isinstance(elapsed, (int, float)) else f"{elapsed:.0f} s"
    stop, updates = result.get("stop_reason", "?"), result.get("updates")
    return f"{stop} after {when}, {updates} updates"
