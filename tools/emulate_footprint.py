"""Emulated sensors as threads or as processes: memory, CPU per update, throughput.

Starts mosquitto (127.0.0.1, TCP_NODELAY) and `edgeps serve` (ASP) for each
mode, then N sensors either as threads in one process (``edgeps.emulate.emulation``,
no emulated compute delay) or as N `edgeps worker` processes, samples their
resident memory and CPU time from /proc, and prints a table (or --json).

    python tools/emulate_footprint.py --workers 8 --seconds 15
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

THREADS = """
import sys
from edgeps.emulate.emulation import Emulation
from edgeps.workloads.scenarios import WorkerProfile
p = WorkerProfile(compute_time=1e-6, compute_jitter=0.0, link_delay=0.0)
n = int(sys.argv[2])
Emulation(sys.argv[1], "fp", profiles={f"w{i:02d}": p for i in range(n)}).start().join()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def proc_stat(pid: int) -> tuple[int, float]:
    """(resident KiB, CPU seconds) of a live process, zeros once it is gone."""
    try:
        rss = 0
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return rss, cpu
    except (OSError, IndexError, ValueError):
        return 0, 0.0


def measure(mode: str, n: int, seconds: float, tmp: Path) -> dict[str, object]:
    exe = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    port = free_port()
    conf = tmp / f"{mode}.conf"
    conf.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\n"
        "persistence false\nset_tcp_nodelay true\n"
    )
    py = sys.executable
    url = f"mqtt://127.0.0.1:{port}"
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    broker = subprocess.Popen([exe, "-c", str(conf)], **quiet)  # type: ignore[call-overload]
    procs: list[subprocess.Popen[bytes]] = []
    serve_err = tmp / f"{mode}-serve.err"
    try:
        time.sleep(0.5)
        serve = subprocess.Popen(
            [py, "-m", "edgeps", "serve", "--broker", url, "--job", "fp",
             "--policy", "asp", "--max-time", str(seconds),
             "--target-accuracy", "0.9999", "--json", "--quiet"],
            stdout=subprocess.PIPE, stderr=serve_err.open("wb"),
        )  # fmt: skip
        procs.append(serve)
        time.sleep(1.0)
        logs = [tmp / f"{mode}-worker{i}.err" for i in range(n)]
        keep = [{"stdout": subprocess.DEVNULL, "stderr": f.open("wb")} for f in logs]
        if mode == "threads":
            workers = [subprocess.Popen([py, "-c", THREADS, url, str(n)], **keep[0])]  # type: ignore[call-overload]
        else:
            workers = [
                subprocess.Popen(
                    [py, "-m", "edgeps", "worker", "--broker", url, "--job", "fp",
                     "--id", f"w{i:02d}", "--emulated", f"sensors:{i}/{n}",
                     "--log-level", "warning"], **keep[i],
                )  # type: ignore[call-overload]
                for i in range(n)
            ]  # fmt: skip
        procs += workers
        peak, cpu = 0, {}
        while serve.poll() is None:
            stats = {w.pid: proc_stat(w.pid) for w in workers}
            peak = max(peak, sum(s[0] for s in stats.values()))
            cpu.update({pid: s[1] for pid, s in stats.items() if s[1]})
            time.sleep(0.25)
        stdout = serve.communicate(timeout=30)[0]
        if serve.returncode != 0 or not stdout:
            raise SystemExit(
                f"emulate_footprint: edgeps serve exited {serve.returncode}:\n"
                + serve_err.read_text(errors="replace")
            )
        out = json.loads(stdout)
        for w, log in zip(workers, logs, strict=False):
            if w.wait(timeout=30) != 0:
                raise SystemExit(
                    f"emulate_footprint: a {mode} worker exited {w.returncode}:\n"
                    + log.read_text(errors="replace")
                )
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        broker.terminate()
        broker.wait(timeout=10)
    updates = int(out.get("updates", 0))
    total_cpu = sum(cpu.values())
    return {
        "mode": mode,
        "workers": n,
        "rss_mib_total": round(peak / 1024, 1),
        "rss_mib_per_worker": round(peak / 1024 / n, 1),
        "updates": updates,
        "updates_per_s": round(updates / seconds, 1),
        "worker_cpu_s": round(total_cpu, 2),
        "cpu_ms_per_update": round(1000 * total_cpu / max(updates, 1), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(m, args.workers, args.seconds, Path(tmp))
                for m in ("threads", "processes")]  # fmt: skip
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    keys = list(rows[0])
    widths = [max(len(k), *(len(str(r[k])) for r in rows)) for k in keys]
    print("  ".join(k.ljust(w) for k, w in zip(keys, widths, strict=True)))
    for r in rows:
        print("  ".join(str(r[k]).ljust(w) for k, w in zip(keys, widths, strict=True)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
