"""`edgeps bench byzantine`: accuracy and time to target with workers that lie.

For each policy, each kind of lie (``byzantine_workers.LIES``) and 1 or 2
liars of 8: a real `edgeps serve` on a private mosquitto on 127.0.0.1 and 8
worker threads (the board's worker loop, C kernels) on Dirichlet-0.3 shards
of the dataset, the liars among them. Each policy also runs clean (no liar)
as the reference. Serve's metrics give the time from its start to the first
evaluation at the target and the accuracy (the median of the last ``LAST``
evaluations, about the last 5 s), and its JSON, per worker,
the pushes centered clipping pulled in (``pulled_in``) and those a worker's
record weighed below one (``down_weighted``): the honest workers' counts say
how often skewed honest data was taken for a lie.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edgeps.lab.bench.byzantine_workers import LIES, start_fleet

POLICIES = ("dsp", "fedbuff:k=4", "fedavg")
H = {"dsp": 1, "fedbuff:k=4": 8, "fedavg": 8}  # local steps per policy
QUICK_LIES = ("flip10", "x1e6", "samples", "randlabels")
DATASET = "sensors"
TARGET = 0.9
LAST = 10  # a run's accuracy: the median of its last this many evaluations
WORKERS = 8


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--lies", default=",".join(LIES), help="kinds of lie")
    parser.add_argument("--liars", default="1,2", help="liars of 8, each a run")
    parser.add_argument("--quick", action="store_true", help=", ".join(QUICK_LIES))
    parser.add_argument("--max-time", type=float, default=25.0, help="s per run")
    parser.add_argument("--target-accuracy", type=float, default=TARGET)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print JSON instead")


def _serve(url: str, job: str, policy: str, args: Any, metrics: Path) -> list[str]:
    return [
        sys.executable, "-m", "edgeps", "serve", "--broker", url, "--job", job,
        "--dataset", DATASET, "--policy", policy,
        "--local-steps", str(H.get(policy, 1)),
        "--max-time", str(args.max_time), "--seed", str(args.seed),
        "--metrics-out", str(metrics), "--json", "--quiet",
    ]  # fmt: skip


def run_once(
    url: str, job: str, policy: str, lie: str | None, n_liars: int, args: Any, tmp: Path
) -> dict[str, Any]:
    """One job: serve and 8 workers, ``n_liars`` of them telling ``lie``."""
    metrics = tmp / f"{job}.jsonl"
    err = (tmp / f"{job}.err").open("wb")
    serve = subprocess.Popen(
        _serve(url, job, policy, args, metrics), stdout=subprocess.PIPE, stderr=err
    )
    time.sleep(1.0)  # serve subscribes before the first HELLO
    liars = {WORKERS - 1 - i: lie for i in range(n_liars)} if lie else {}
    fleet = start_fleet(url, job, DATASET, WORKERS, liars, args.seed)
    try:
        out, _ = serve.communicate(timeout=args.max_time + 60)
    except subprocess.TimeoutExpired:
        serve.kill()
        out, _ = serve.communicate(timeout=10)
    finally:
        fleet.end()
        err.close()
    row: dict[str, Any] = {"policy": policy, "lie": lie or "clean", "liars": n_liars}
    try:
        summary = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        row["error"] = (tmp / f"{job}.err").read_text(errors="replace")[-400:]
        return row
    workers = summary.get("workers", {})
    honest = {w: r for w, r in workers.items() if not w.startswith("evil")}
    row["accuracy"] = _last_accuracy(metrics, summary.get("accuracy"))
    row["time_to_target"] = _time_to(metrics, args.target_accuracy)
    liars_rows = [r for w, r in workers.items() if w.startswith("evil")]
    row["honest_down"] = sum(r.get("down_weighted", 0) for r in honest.values())
    row["honest_pulled"] = sum(r.get("pulled_in", 0) for r in honest.values())
    row["honest_pushes"] = sum(r.get("accepted", 0) for r in honest.values())
    row["liar_down"] = sum(r.get("down_weighted", 0) for r in liars_rows)
    row["liar_pulled"] = sum(r.get("pulled_in", 0) for r in liars_rows)
    row["liar_pushes"] = sum(r.get("accepted", 0) for r in liars_rows)
    row["state"] = summary.get("state")
    return row


def _evaluations(metrics: Path) -> list[tuple[float, float]]:
    """(elapsed, accuracy) of each metrics record that has an accuracy."""
    try:
        lines = metrics.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        acc = rec.get("accuracy")
        if acc is not None:
            out.append((float(rec.get("elapsed", 0.0)), float(acc)))
    return out


def _time_to(metrics: Path, target: float) -> float | None:
    for elapsed, acc in _evaluations(metrics):
        if acc >= target:
            return elapsed
    return None


def _last_accuracy(metrics: Path, final: float | None) -> float | None:
    """The median of the last ``LAST`` evaluations (one is noisy), else ``final``."""
    accs = [a for _, a in _evaluations(metrics)][-LAST:]
    return round(statistics.median(accs), 4) if accs else final


def run(args: Any) -> int:
    from edgeps.transport.broker import start_mosquitto

    policies = [p for p in args.policies.split(",") if p]
    lies = list(QUICK_LIES) if args.quick else [x for x in args.lies.split(",") if x]
    for lie in lies:
        if lie not in LIES:
            print(f"edgeps bench byzantine: unknown lie {lie!r}", file=sys.stderr)
            return 2
    counts = [int(x) for x in args.liars.split(",") if x]
    rows: list[dict[str, Any]] = []
    started = time.monotonic()
    k = 0
    with (
        tempfile.TemporaryDirectory(prefix="edgeps-byz-") as tmp,
        start_mosquitto() as b,
    ):
        for policy in policies:
            plan: list[tuple[str | None, int]] = [(None, 0)]
            # a gradient (H = 1) has no local steps to lie about
            steps_lies = ("steps65535", "steps0", "stepsneg")
            usable = [x for x in lies if H.get(policy, 1) > 1 or x not in steps_lies]
            plan += [(lie, n) for lie in usable for n in counts]
            for lie, n in plan:
                k += 1
                row = run_once(b.url, f"byz{k}", policy, lie, n, args, Path(tmp))
                rows.append(row)
                if not args.json:
                    print(_line(row, rows), flush=True)
    _compare(rows)
    info = {
        "dataset": DATASET,
        "workers": WORKERS,
        "target_accuracy": args.target_accuracy,
        "max_time": args.max_time,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    if args.json:
        print(json.dumps({"info": info, "rows": rows}))
    else:
        print(table(rows, info))
    return 0


def _compare(rows: list[dict[str, Any]]) -> None:
    """Each row's accuracy and time against its policy's clean run."""
    clean = {r["policy"]: r for r in rows if r["lie"] == "clean"}
    for r in rows:
        c = clean.get(r["policy"])
        if c is None or r.get("accuracy") is None or c.get("accuracy") is None:
            continue
        r["d_accuracy"] = round(100 * (r["accuracy"] - c["accuracy"]), 1)
        t, tc = r.get("time_to_target"), c.get("time_to_target")
        r["time_ratio"] = None if t is None or not tc else round(t / tc, 2)


def _fmt(value: Any, spec: str = "") -> str:
    return "-" if value is None else format(value, spec)


def _line(row: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    if "error" in row:
        return f"{row['policy']:<12} {row['lie']:<11} {row['liars']}  failed"
    return (
        f"{row['policy']:<12} {row['lie']:<11} {row['liars']}  "
        f"acc {_fmt(row['accuracy'], '.3f')}  t {_fmt(row['time_to_target'], '.1f')} s"
        f"  honest pulled {row['honest_pulled']} down {row['honest_down']}"
        f" of {row['honest_pushes']}"
    )


def table(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    head = (
        f"{'policy':<12} {'lie':<11} {'liars':>5} {'accuracy':>8} {'vs clean':>8} "
        f"{'t target':>8} {'x clean':>7} {'honest pulled/down/pushes':>25} "
        f"{'liar pulled/down/pushes':>23}"
    )
    lines = [
        f"{info['dataset']}, {info['workers']} workers (Dirichlet 0.3), real mosquitto;"
        f" target {info['target_accuracy']:g}, max {info['max_time']:g} s per run",
        head,
        "-" * len(head),
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['policy']:<12} {r['lie']:<11} {r['liars']:>5}  failed")
            continue
        honest = f"{r.get('honest_pulled', 0)}/{r['honest_down']}/{r['honest_pushes']}"
        liar = f"{r.get('liar_pulled', 0)}/{r['liar_down']}/{r.get('liar_pushes', 0)}"
        lines.append(
            f"{r['policy']:<12} {r['lie']:<11} {r['liars']:>5} "
            f"{_fmt(r['accuracy'], '.3f'):>8} {_fmt(r.get('d_accuracy'), '+.1f'):>8} "
            f"{_fmt(r['time_to_target'], '.1f'):>8} "
            f"{_fmt(r.get('time_ratio'), '.2f'):>7} {honest:>25} {liar:>23}"
        )
    lines.append(f"wall {info['wall_seconds']:g} s")
    return "\n".join(lines)
