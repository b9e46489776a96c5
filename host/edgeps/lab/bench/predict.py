"""`edgeps bench predict`: one prediction's time and memory, per model and runtime.

For each model kind (logistic, softmax, mlp) a model with a scaler is
exported and one row at a time is predicted (raw features in, class out) by:

- ``c``: the ``edgeps export --format c`` header over native/'s kernels,
  compiled with gcc -O2 into a small driver that times its rows;
  memory is the model's constant arrays plus the caller's buffers (stack).
- ``numpy``: ``TrainedModel.predict`` on one row; memory is the peak
  tracemalloc sees during one call.
- ``onnxruntime``: the ``--format onnx`` graph, one row per ``run``; memory
  is the model file (the session's own arenas are not visible from Python).
- ``micropython``: ``edgeps_worker.predict`` on the ``--format micropython``
  file under the MicroPython unix binary (``-X heapsize``); memory is the
  peak live heap: everything loaded (code, model, scratch) plus one
  prediction's allocations, measured with the collector off.

Times are the mean over ``--rows`` rows after one untimed prediction. The
unix port is 64-bit: a board's heap figures are smaller, its times larger.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec
from edgeps.lab.bench.micropython import firmware_dir, micropython_path
from edgeps.model.c_export import scratch_length
from edgeps.model.card import ModelCard, TrainedModel
from edgeps.model.scaler import Scaler
from edgeps.model.writers import export

MODELS = ("logistic:30", "softmax:64x10", "mlp:64-32-10")
HEAP = "64K"
DEADLINE = 300.0

MP_SCRIPT = """
import gc, sys, time
from array import array
from edgeps_worker.predict import Model

path, nf, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
m = Model(path)
x = array("f", [((i * 13) % 7 - 3) / 3.0 for i in range(nf)])
m.predict(x)
t0 = time.ticks_us()
for r in range(n):
    x[r % nf] += 0.25
    m.predict(x)
us = time.ticks_diff(time.ticks_us(), t0)
gc.collect()
live = gc.mem_alloc()
gc.disable()
m.predict(x)
peak = gc.mem_alloc()
gc.enable()
print(us / n, live, peak)
"""

C_DRIVER = r"""
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>
#include "bench_model.h"
int main(void) {
    float x[BENCH_MODEL_N_FEATURES], scaled[BENCH_MODEL_N_FEATURES];
    float out[BENCH_MODEL_N_OUTPUTS], scratch[BENCH_MODEL_SCRATCH_LENGTH];
    struct timespec t0, t1;
    volatile int32_t sink = 0;
    for (int i = 0; i < BENCH_MODEL_N_FEATURES; i++) x[i] = ((i * 13) % 7 - 3) / 3.0f;
    if (bench_model_check(BENCH_MODEL_SCRATCH_LENGTH) != EpsOk) return 1;
    sink += bench_model_predict(x, scaled, out, scratch);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int r = 0; r < N_ROWS; r++) {
        x[r % BENCH_MODEL_N_FEATURES] += 0.25f;
        sink += bench_model_predict(x, scaled, out, scratch);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ns = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
    printf("%.4f %d\n", ns / 1000.0 / N_ROWS, (int)sink);
    return 0;
}
"""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    parser.add_argument(
        "--rows", type=int, default=200, help="rows predicted per measurement"
    )
    parser.add_argument(
        "--heap", default=HEAP, help=f"MicroPython heap (default: {HEAP})"
    )


def make_model(text: str, seed: int = 0) -> TrainedModel:
    """A model of this spec with random weights and a scaler (timing only)."""
    spec = ModelSpec.parse(text)
    rng = np.random.default_rng(seed)
    params = (rng.normal(size=spec.n_params) * 0.3).astype(np.float32)
    n_out = 2 if spec.kind == "logistic" else spec.n_classes
    scaler = Scaler.fit(rng.normal(size=(50, spec.n_features)))
    card = ModelCard(spec, tuple(f"c{i}" for i in range(n_out)), scaler)
    return TrainedModel(card, params)


def rows_of(model: TrainedModel, n: int) -> np.ndarray:
    rng = np.random.default_rng(1)
    return rng.normal(size=(n, model.spec.n_features)).astype(np.float32)


def bench_c(model: TrainedModel, n: int, work: Path) -> dict[str, Any] | None:
    cc = shutil.which("gcc")
    if cc is None:
        return None
    export(model, "c", work / "bench_model.h")
    (work / "main.c").write_text(f"#define N_ROWS {n}\n" + C_DRIVER)
    native = firmware_dir().parent / "native"  # a checkout's native/
    if not (native / "eps_model.c").is_file():
        return None
    sources = [str(native / s) for s in ("eps.c", "eps_math.c", "eps_model.c")]
    exe = work / "predict_c"
    flags = ["-std=c99", "-O2", "-DEPS_PORTABLE", "-DEPS_NO_DISPATCH",
             "-DEPS_NO_BUILTIN_SQRT"]  # fmt: skip
    subprocess.run(
        [cc, *flags, "-I", str(native), "-I", str(work), str(work / "main.c"),
         *sources, "-o", str(exe), "-lm"],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    spec = model.spec
    const = 4 * (spec.n_params + 2 * spec.n_features)
    stack = 4 * (2 * spec.n_features + model.card.n_outputs + scratch_length(spec))
    return {
        "us_per_sample": float(out.stdout.split()[0]),
        "memory_bytes": const + stack,
        "memory": f"{const} B const arrays + {stack} B caller buffers",
    }


def bench_numpy(model: TrainedModel, X: np.ndarray) -> dict[str, Any]:
    model.predict(X[:1])
    t0 = time.perf_counter()
    for i in range(len(X)):
        model.predict(X[i : i + 1])
    us = (time.perf_counter() - t0) * 1e6 / len(X)
    tracemalloc.start()
    model.predict(X[:1])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    params = model.params.nbytes
    return {
        "us_per_sample": us,
        "memory_bytes": params + peak,
        "memory": f"{params} B params + {peak} B peak per call",
    }


def bench_onnx(model: TrainedModel, X: np.ndarray, work: Path) -> dict[str, Any] | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    path = export(model, "onnx", work / "m.onnx")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    sess.run(None, {"x": X[:1]})
    t0 = time.perf_counter()
    for i in range(len(X)):
        sess.run(None, {"x": X[i : i + 1]})
    us = (time.perf_counter() - t0) * 1e6 / len(X)
    size = path.stat().st_size
    return {"us_per_sample": us, "memory_bytes": size, "memory": f"{size} B model file"}


def bench_micropython(
    model: TrainedModel, n: int, work: Path, heap: str
) -> dict[str, Any] | None:
    exe = micropython_path()
    if exe is None:
        return None
    path = export(model, "micropython", work / "model.bin")
    script = work / "bench_predict.py"
    script.write_text(MP_SCRIPT)
    env = dict(os.environ, MICROPYPATH=f"{firmware_dir()}:.frozen")
    out = subprocess.run(
        [exe, "-X", f"heapsize={heap}", str(script), str(path),
         str(model.spec.n_features), str(n)],
        capture_output=True, text=True, timeout=DEADLINE, env=env,
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"micropython failed: {out.stderr.strip()[-300:]}")
    us, live, peak = out.stdout.split()
    size = path.stat().st_size
    return {
        "us_per_sample": float(us),
        "memory_bytes": int(peak),
        "memory": f"peak heap {peak} B ({live} B live: code, model, scratch; "
        f"file {size} B; heap {heap})",
    }


def measure(rows: int, heap: str) -> list[dict[str, Any]]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for text in MODELS:
            model = make_model(text)
            X = rows_of(model, rows)
            for runtime, res in (
                ("c", bench_c(model, rows, work)),
                ("numpy", bench_numpy(model, X)),
                ("onnxruntime", bench_onnx(model, X, work)),
                ("micropython", bench_micropython(model, rows, work, heap)),
            ):
                if res is not None:
                    results.append({"model": text, "runtime": runtime, **res})
    return results


def run(args: argparse.Namespace) -> int:
    if args.rows < 1:
        print("edgeps bench predict: --rows must be at least 1")
        return 2
    results = measure(args.rows, args.heap)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{'model':14} {'runtime':12} {'us/sample':>10}  memory")
    for r in results:
        print(
            f"{r['model']:14} {r['runtime']:12} {r['us_per_sample']:10.2f}  "
            f"{r['memory']}"
        )
    return 0
