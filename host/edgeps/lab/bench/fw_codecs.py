"""The codec rows of `edgeps bench fw-kernels`: UPDATE encoding, PARAMS decoding.

Per model size and dtype (f32, f16, i8 with its residual kept as int8, the
board's default, and i8 kept as float32), the MicroPython unix binary times
``GradCodec.encode`` of one gradient (error feedback carried from step to
step) and ``codec_read.write_params`` of one whole encoded vector in 1 KB
PARAMS chunks (cut on whole records), median of ``repeat`` after one untimed
step, collector on. Bytes allocated are ``gc.mem_alloc()`` deltas of one
encode and one decode with the collector off (64 MB heap). The host's numpy
encoder (``fp16_quantize`` / ``int8_quantize`` with a residual) is timed on
the same vector. A firmware without ``edgeps_worker/codec.py`` (an older
revision) has no codec rows.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from edgeps.kernels import ModelSpec, get_backend
from edgeps.lab.bench.micropython import micropython_path

DEADLINE = 300.0
CHUNK = 1024  # the board's default max_chunk
# (name, dtype code, how I8 keeps its residual)
CODECS = (("f32", 1, "i8"), ("f16", 2, "i8"), ("i8", 3, "i8"), ("i8-f32res", 3, "f32"))

SCRIPT = """
import gc, time
from array import array
from edgeps_worker import codec, codec_read


def case(n, code, keep, repeat, mode):
    src = array("f", [((i * 37) % 11 - 5) / 100.0 for i in range(n)])
    g = array("f", src)
    c = codec.GradCodec(n, keep)
    body = bytes(c.encode(code, g))
    mv = memoryview(body)
    step = CHUNK - CHUNK % codec.RECORD[code]
    p = array("f", bytes(4 * n))

    def decode():
        for off in range(0, len(body), step):
            codec_read.write_params(p, code, off, mv[off : off + step])

    decode()
    if mode == "alloc":
        g[:] = src
        gc.collect()
        gc.disable()
        a0 = gc.mem_alloc()
        c.encode(code, g)
        a1 = gc.mem_alloc()
        decode()
        a2 = gc.mem_alloc()
        gc.enable()
        return [a1 - a0], [a2 - a1]
    enc, dec = [], []
    for _ in range(repeat):
        g[:] = src
        t0 = time.ticks_us()
        c.encode(code, g)
        enc.append(time.ticks_diff(time.ticks_us(), t0))
        t0 = time.ticks_us()
        decode()
        dec.append(time.ticks_diff(time.ticks_us(), t0))
    return enc, dec


def main(cases, repeat, mode):
    for n, code, keep in cases:
        enc, dec = case(n, code, keep, repeat, mode)
        print(mode, n, code, keep, " ".join(str(v) for v in enc), "|",
              " ".join(str(v) for v in dec))
"""


def _run(
    cases: list[tuple[int, int, str]], repeat: int, mode: str, firmware: Path
) -> dict[tuple[int, int, str], tuple[list[int], list[int]]]:
    exe = micropython_path()
    if exe is None:
        raise FileNotFoundError("micropython binary missing")
    cmd = [exe] + (["-X", "heapsize=64M"] if mode == "alloc" else [])
    body = SCRIPT.replace("CHUNK", str(CHUNK))
    cmd += ["-c", body + f"\nmain({cases!r}, {repeat}, {mode!r})\n"]
    env = dict(os.environ, MICROPYPATH=f"{firmware}:.frozen")
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=DEADLINE, env=env, cwd=firmware
    )
    found = {}
    for line in proc.stdout.splitlines():
        head, _, dec = line.partition(" | ")
        parts = head.split()
        if len(parts) >= 5 and parts[0] == mode:
            key = (int(parts[1]), int(parts[2]), parts[3])
            found[key] = ([int(v) for v in parts[4:]], [int(v) for v in dec.split()])
    if proc.returncode != 0 or len(found) != len(cases):
        tail = (proc.stderr + proc.stdout).strip()[-400:]
        raise RuntimeError(f"micropython codec {mode} run failed: {tail}")
    return found


def _numpy_ms(n: int, code: int, repeat: int) -> float:
    """Median ms of the host's numpy encoder on the vector SCRIPT encodes."""
    ref = get_backend("numpy")
    i = np.arange(n)
    g = (((i * 37) % 11 - 5) / 100.0).astype(np.float32)
    res = np.zeros(n, np.float32)

    def once() -> None:
        if code == 2:
            ref.fp16_quantize(g, None)
        elif code == 3:
            ref.int8_quantize(g, 128, res)
        else:
            g.tobytes()

    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(20):
            once()
        samples.append((time.perf_counter() - t0) / 20 * 1e3)
    return statistics.median(samples)


def codec_rows(
    models: list[str], repeat: int, firmware: Path
) -> tuple[list[dict[str, Any]], str | None]:
    """The codec rows (none for a firmware without codecs) and an error, if any."""
    if not (firmware / "edgeps_worker" / "codec.py").is_file():
        return [], None
    sizes = sorted({ModelSpec.parse(m).n_params: m for m in models}.items())
    cases = [(n, code, keep) for n, _ in sizes for _, code, keep in CODECS]
    try:
        times = _run(cases, repeat, "time", firmware)
        allocs = _run(cases, 1, "alloc", firmware)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        return [], str(exc)
    rows = []
    for n, model in sizes:
        for name, code, keep in CODECS:
            enc, dec = times[(n, code, keep)]
            aenc, adec = allocs[(n, code, keep)]
            rows.append(
                {
                    "model": model,
                    "n_params": n,
                    "codec": name,
                    "encode_ms": round(statistics.median(enc) / 1e3, 4),
                    "decode_ms": round(statistics.median(dec) / 1e3, 4),
                    "encode_alloc_bytes": aenc[0],
                    "decode_alloc_bytes": adec[0],
                    "numpy_encode_ms": round(_numpy_ms(n, code, repeat), 5),
                }
            )
    return rows, None


def print_codec_table(rows: list[dict[str, Any]], repeat: int) -> None:
    if not rows:
        return
    print(
        f"\nUPDATE encode (one step) and PARAMS decode (whole vector, {CHUNK} B"
        f" chunks) on MicroPython, median of {repeat}"
    )
    print(
        f"{'model':<16} {'codec':<10} {'enc ms':>8} {'dec ms':>8} {'enc B':>8} "
        f"{'dec B':>8} {'numpy enc ms':>13}"
    )
    for r in rows:
        print(
            f"{r['model']:<16} {r['codec']:<10} {r['encode_ms']:>8.3f} "
            f"{r['decode_ms']:>8.3f} {r['encode_alloc_bytes']:>8} "
            f"{r['decode_alloc_bytes']:>8} {r['numpy_encode_ms']:>13.4f}"
        )
    print("enc B / dec B: bytes allocated by one encode / decode, collector off")
