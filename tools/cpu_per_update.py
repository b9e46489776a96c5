"""CPU per applied update of serve, the emulator and mosquitto, in a steady window.

Starts a private mosquitto on 127.0.0.1, `edgeps serve` (job defaults, no
target) and `edgeps emulate --workers N --scenario S`, reads each process's CPU
time (children included) over the middle 40% of the run and the updates serve
applied in that window (its metrics file), prints one JSON line and stops
everything it started. The simulator's host costs (`edgeps.sim.types`,
`HOST_CPU_US`, `EMULATOR_CPU_US`) come from it.

    python tools/cpu_per_update.py 64 homogeneous 20
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

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its direct children."""
    total = 0.0
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        kids = []
    for p in [pid, *(int(k) for k in kids)]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICK
    return total


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workers", type=int)
    ap.add_argument("scenario")
    ap.add_argument("seconds", type=float, nargs="?", default=20.0)
    args = ap.parse_args()
    if not 1 <= args.workers <= 2000 or not 10 <= args.seconds <= 300:
        print("workers in 1..2000, seconds in 10..300", file=sys.stderr)
        return 2
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    edgeps = [sys.executable, "-m", "edgeps"]
    port, t = free_port(), args.seconds
    procs: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="edgeps-cpu-") as tmp:
        d = Path(tmp)
        (d / "m.conf").write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\n")
        try:
            broker = subprocess.Popen([mosquitto, "-c", str(d / "m.conf")],
                                      stderr=subprocess.DEVNULL)  # fmt: skip
            procs.append(broker)
            time.sleep(0.5)
            url = f"mqtt://127.0.0.1:{port}"
            serve = subprocess.Popen(
                [*edgeps, "serve", "--broker", url, "--job", "cpu", "--max-time",
                 str(t), "--json", "--quiet", "--metrics-out", str(d / "m.jsonl")],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs.append(serve)
            time.sleep(2.0)
            emu = subprocess.Popen(
                [*edgeps, "emulate", "--broker", url, "--job", "cpu", "--workers",
                 str(args.workers), "--scenario", args.scenario, "--max-time",
                 str(t + 5), "--json"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs.append(emu)
            time.sleep(t * 0.45)
            c1, t1 = [cpu_seconds(p.pid) for p in (serve, emu, broker)], time.time()
            time.sleep(t * 0.4)
            c2, t2 = [cpu_seconds(p.pid) for p in (serve, emu, broker)], time.time()
            out, _ = serve.communicate(timeout=t + 60)
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
        rows = [json.loads(x) for x in (d / "m.jsonl").read_text().splitlines()]
    inside = [r for r in rows if t1 <= r["time"] <= t2]
    if len(inside) < 2:
        print("no updates in the window", file=sys.stderr)
        return 1
    rate = (inside[-1]["updates"] - inside[0]["updates"]) / (
        inside[-1]["time"] - inside[0]["time"]
    )
    cores = [(b - a) / (t2 - t1) for a, b in zip(c1, c2, strict=True)]
    names = ("serve", "emulate", "broker")
    print(json.dumps({
        "workers": args.workers, "scenario": args.scenario,
        "updates_per_s": round(rate),
        "us_per_update": {k: round(c / rate * 1e6) for k, c in zip(names, cores,
                                                                   strict=True)},
        "cores": dict(zip(names, (round(c, 2) for c in cores), strict=True)),
        "accuracy": json.loads(out).get("accuracy"),
        "load_avg": os.getloadavg()[0],
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
