"""`edgeps bench relay`: the central host's message rate with and without relays.

Two short runs of the same boards for the same time, each on fresh
mosquittos on 127.0.0.1 with serve on the central one (no target, so both
run the whole ``--time``):

- ``direct``: every board (``edgeps emulate``'s sensors) on the central job;
- ``relays``: ``--sites`` site mosquittos bridged to the central one
  (`edgeps.relay.bridge`), a relay per site, the boards split over them.

A tap on the central broker counts every message on the job's ``up/+``
(what serve receives) and ``down/+`` (what serve sends) topics after a
warm-up. Columns: messages per second each way at the central host,
updates it applied per second, board gradients per second (applied by
serve directly or by the site PSs), and the fan-in (board gradients per
central update).
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

from edgeps_worker import wire_host as wire

JOB = "benchrelay"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sites", type=int, default=2, help="relays (default: 2)")
    parser.add_argument(
        "--boards", type=int, default=4, help="boards per site (default: 4)"
    )
    parser.add_argument(
        "--time", type=float, default=20.0, help="seconds per run (default: 20)"
    )
    parser.add_argument(
        "--warmup", type=float, default=3.0, help="seconds not counted (default: 3)"
    )
    parser.add_argument(
        "--policy", default="asp", help="central sync policy (default: asp)"
    )
    parser.add_argument(
        "--site-policy", default="bsp", help="the sites' policy (default: bsp)"
    )
    parser.add_argument(
        "--min-fold", type=int, default=0, help="as edgeps relay --min-fold"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead")


class Tap:
    """Counts the job's up and down messages on a broker, in a window."""

    def __init__(self, url: str, job: str) -> None:
        from edgeps.transport.options import ConnectionOptions
        from edgeps.transport.paho_link import MqttLink

        self.link = MqttLink(ConnectionOptions(url), "edgeps-bench-tap")
        self.job = job
        self.counting = False
        self.up = self.down = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Tap:
        self.link.connect()
        self.link.subscribe(f"edgeps/{self.job}/up/+", 0)
        self.link.subscribe(f"edgeps/{self.job}/down/+", 0)
        self._thread.start()
        return self

    def _run(self) -> None:
        up = f"edgeps/{self.job}/up/"
        while not self._stop.is_set():
            try:
                got = self.link.poll(100)
            except OSError:
                return
            if got is None or not self.counting:
                continue
            if got[0].startswith(up):
                self.up += 1
            else:
                self.down += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.link.close()


def _serve(url: str, policy: str, seconds: float) -> tuple[Any, threading.Thread, dict]:
    from edgeps.runtime.config import merge
    from edgeps.runtime.job import Job
    from edgeps.transport.broker import open_broker

    cfg = merge(
        {
            "broker": url,
            "job": JOB,
            "policy": policy,
            "max_time": seconds,
            "quiet": True,
            "seed": 1,
        }
    )
    job = Job(cfg, broker=open_broker(url), banner=False)
    out: dict[str, Any] = {}
    th = threading.Thread(target=lambda: out.update(s=job.run()), daemon=True)
    th.start()
    if not job.ready.wait(20):
        raise RuntimeError("serve did not start")
    return job, th, out


def measure(
    setup: str, sites: int, boards: int, seconds: float, warmup: float, args: Any
) -> dict[str, Any]:
    """One run; its row."""
    from edgeps.emulate.emulation import Emulation
    from edgeps.relay import Relay, RelayConfig
    from edgeps.relay.bridge import start_bridged_mosquitto
    from edgeps.transport.broker import start_mosquitto
    from edgeps.transport.options import ConnectionOptions

    opened: list[Any] = []
    relays: list[Relay] = []
    relay_out: dict[str, Any] = {}
    threads: list[threading.Thread] = []
    emus: list[Emulation] = []
    central = start_mosquitto()
    opened.append(central)
    tap = Tap(central.url, JOB).start()
    job, host, out = _serve(central.url, args.policy, seconds)
    try:
        if setup == "direct":
            emus.append(
                Emulation(
                    central.url, JOB, n_workers=sites * boards, duration=seconds + 10
                ).start()
            )
        else:
            for i in range(sites):
                rid = f"relay-{i}"
                broker = start_bridged_mosquitto(f"s{i}", central.address, JOB, rid)
                opened.append(broker)
                relay = Relay(
                    RelayConfig(
                        central=ConnectionOptions(broker=broker.url),
                        site=ConnectionOptions(broker=broker.url),
                        job=JOB,
                        relay_id=rid,
                        site_job=f"site{i}",
                        policy=args.site_policy,
                        min_fold=args.min_fold,
                    )
                )
                relays.append(relay)
                th = threading.Thread(
                    target=lambda r=relay, k=rid: relay_out.update({k: r.run()}),
                    daemon=True,
                )
                th.start()
                threads.append(th)
                if not relay.ready.wait(30):
                    raise RuntimeError(f"relay {rid} did not start")
                emus.append(
                    Emulation(
                        broker.url,
                        f"site{i}",
                        n_workers=boards,
                        seed=i,
                        duration=seconds + 10,
                    ).start()
                )
        time.sleep(warmup)
        tap.counting = True
        t0 = time.monotonic()
        host.join(seconds + 30)
        window = time.monotonic() - t0
        tap.counting = False
    finally:
        job.stop()
        host.join(10)
        for th in threads:
            th.join(20)
        for relay in relays:
            relay.stop()
        for th in threads:
            th.join(20)
        for emu in emus:
            emu.stop()
            emu.join(20)
        tap.stop()
        for b in reversed(opened):
            b.close()
    summary = out.get("s")
    if summary is None:
        raise RuntimeError("serve ended without a summary")
    if setup == "direct":
        board_updates = summary.updates
    else:
        board_updates = sum(
            r.site.updates for r in relay_out.values() if r.site is not None
        )
    elapsed = max(summary.elapsed, 1e-9)
    return {
        "setup": setup,
        "boards": sites * boards,
        "central_workers": len(summary.workers),
        "central_in_per_s": tap.up / window,
        "central_out_per_s": tap.down / window,
        "central_updates_per_s": summary.updates / elapsed,
        "board_updates_per_s": board_updates / elapsed,
        "fan_in": board_updates / summary.updates if summary.updates else 0.0,
        "accuracy": summary.accuracy,
    }


def run(args: argparse.Namespace) -> int:
    if args.sites < 1 or args.boards < 1 or args.time <= args.warmup:
        raise SystemExit("need --sites >= 1, --boards >= 1 and --time > --warmup")
    if not wire.valid_id(JOB):
        raise SystemExit("bad job id")
    rows = [
        measure(s, args.sites, args.boards, args.time, args.warmup, args)
        for s in ("direct", "relays")
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    head = (
        f"{'setup':<8} {'boards':>6} {'central wkrs':>12} {'in msg/s':>9} "
        f"{'out msg/s':>9} {'central upd/s':>13} {'board upd/s':>11} "
        f"{'fan-in':>6} {'accuracy':>8}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        acc = "n/a" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
        print(
            f"{r['setup']:<8} {r['boards']:>6} {r['central_workers']:>12} "
            f"{r['central_in_per_s']:>9.1f} {r['central_out_per_s']:>9.1f} "
            f"{r['central_updates_per_s']:>13.1f} {r['board_updates_per_s']:>11.1f} "
            f"{r['fan_in']:>6.2f} {acc:>8}"
        )
    return 0
