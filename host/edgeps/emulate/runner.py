"""Run emulated sensors on event loops: one loop per process, ``processes`` of them.

`LoopEmulation` has the thread emulator's interface (start, stop, join,
running, reports, elapsed) and adds ``cost``: CPU seconds per update and
resident memory per sensor, measured by each process on itself.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing as mp
import os
import queue
import resource
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from edgeps.emulate.common import (
    EmulationConfig,
    SensorReport,
    partition_scheme,
    profile_class,
    with_compute,
)
from edgeps.emulate.loop import EventLoop
from edgeps.emulate.sensor import Sensor, SensorEnv
from edgeps.emulate.timers import spread
from edgeps.netem.links import is_shaped, with_links
from edgeps.runtime.inbound import percentiles
from edgeps.transport.options import ConnectionOptions
from edgeps.workloads.energy import board_power
from edgeps.workloads.scenarios import Scenario, WorkerProfile, make_scenario

log = logging.getLogger(__name__)

MAX_LOOP_SENSORS = 10000
RAMP_PER_SENSOR = 0.002  # seconds between two sensors' first connects
DRAIN_SECONDS = 3.0  # after the end, to write every BYE and DISCONNECT
FREEZE_AFTER_RAMP = 2.0  # seconds after the last first connect: gc.freeze()


@dataclass
class ShardResult:
    """What one process reports back."""

    reports: list[dict[str, Any]] = field(default_factory=list)
    cpu_s: float = 0.0  # CPU of this process while its sensors ran
    rss_base: int = 0  # bytes resident before the sensors started
    rss_end: int = 0  # bytes resident at the end
    rss_peak: int = 0  # the most resident while the sensors ran (read each second)
    sensors: int = 0
    round_trips: list[float] = field(default_factory=list)  # seconds, a sample
    error: str = ""


def rss_bytes() -> int:
    """This process's resident set size now (Linux /proc; else the peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def raise_fd_limit(need: int) -> None:
    """Lift the soft open-files limit toward the hard one if ``need`` exceeds it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        cap = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (cap, hard))


def _load_shards(cfg: EmulationConfig, indices: list[int], n: int) -> list[Any]:
    from edgeps.pyworker.localdata import LocalData
    from edgeps.workloads import datasets

    ds = datasets.load_dataset(cfg.dataset, cfg.seed)
    scheme = partition_scheme(cfg)
    parts = datasets.partition(ds.y_train, n, scheme, cfg.seed)
    out = []
    for i in indices:
        X, y = ds.shard(parts[i])
        out.append(LocalData(X, y, f"{cfg.dataset}:{i}/{n}", shape=ds.shape))
    return out


def _job_model(cfg: EmulationConfig, stop: Any, deadline: float | None) -> str | None:
    """The model to train: given, or the job's retained MODEL (None: none/done)."""
    if cfg.model is not None:
        return cfg.model
    from edgeps.pyworker.model_fetch import fetch_model
    from edgeps.transport.paho_link import MqttLink

    timeout = None if deadline is None else max(0.1, deadline - time.monotonic())
    link = MqttLink(cfg.connection, f"{cfg.job}-emulate")
    try:
        # an unsigned MODEL "done" cannot end sensors that hold no session
        job = fetch_model(
            link, cfg.job, stop=stop.is_set, timeout=timeout, want_running=True
        )
    finally:
        link.close()
    if job is None:
        return None
    return job.model


def _complete(model: str, dataset: str, seed: int) -> str:
    """A short model form completed for the dataset, as the thread engine does."""
    from edgeps.kernels import ModelSpec
    from edgeps.runtime.model_forms import complete_model
    from edgeps.workloads import datasets

    ds = datasets.load_dataset(dataset, seed)
    sizes = ModelSpec.parse(ds.model_spec)
    n_classes = max(2, sizes.n_classes)
    full = complete_model(model, sizes.n_features, n_classes, ds.shape)
    return str(ModelSpec.parse(full))


def run_shard(
    cfg: EmulationConfig,
    entries: list[tuple[int, str, WorkerProfile]],
    n_total: int,
    stop: Any,
    deadline: float | None,
    t0: float,
) -> ShardResult:
    """Run these sensors on one event loop until ``stop``, the deadline or all end."""
    cpu0 = time.process_time()
    result = ShardResult(sensors=len(entries))
    raise_fd_limit(len(entries) + 256)
    data = _load_shards(cfg, [e[0] for e in entries], n_total)
    reports = [SensorReport(wid, profile_class(p)) for _, wid, p in entries]
    model = _job_model(cfg, stop, deadline)
    if model is None:
        for r in reports:
            r.stop_reason = "done" if not stop.is_set() else "stopped"
        result.reports = [asdict(r) for r in reports]
        return result
    loop = EventLoop()
    env = SensorEnv(
        loop, cfg.connection, cfg.job, model, t0, batch=cfg.batch, seed=cfg.seed,
        max_iterations=cfg.max_iterations, heartbeat_ms=cfg.heartbeat_ms,
        release_timeout_ms=cfg.release_timeout_ms, max_chunk=cfg.max_chunk,
        hmac_key=cfg.hmac_key, pace=cfg.pace, board=cfg.board,
        sleep_at_barrier=cfg.sleep_at_barrier,
    )  # fmt: skip
    sensors = [
        Sensor(env, i, wid, p, d, r)
        for (i, wid, p), d, r in zip(entries, data, reports, strict=True)
    ]
    result.rss_base = rss_bytes()
    cpu_start = time.process_time()
    now = loop.now()
    ramp = RAMP_PER_SENSOR * len(sensors)
    for s, at in zip(sensors, spread(len(sensors), now, ramp), strict=True):
        s.start(at)
    # once every sensor has joined, its clients, workers and trainers live as
    # long as the run: keep them out of gen-2 collections (edgeps.runtime.gc_freeze)
    if cfg.gc_freeze:
        gc.collect()
        loop.timers.at(now + ramp + FREEZE_AFTER_RAMP, gc.freeze)
    next_check = [now + 1.0]

    def done() -> bool:
        if stop.is_set():
            return True
        t = loop.now()
        if t < next_check[0]:
            return False
        next_check[0] = t + 1.0
        result.rss_peak = max(result.rss_peak, rss_bytes())
        return all(_ended(s) for s in sensors)

    try:
        loop.run(done, deadline)
    except Exception as exc:  # reported; the parent shows it
        log.exception("event loop failed")
        result.error = f"{type(exc).__name__}: {exc}"
    env.ending = True
    for s in sensors:
        s.finish()
    drain = loop.now() + DRAIN_SECONDS
    loop.run(lambda: loop.n_links == 0, drain)
    result.rss_end = rss_bytes()
    result.rss_peak = max(result.rss_peak, result.rss_end)
    result.cpu_s = time.process_time() - cpu_start
    result.reports = [asdict(r) for r in reports]
    result.round_trips = list(env.round_trips)
    log.debug(
        "shard done: %d sensors, %.2fs CPU in all",
        len(sensors),
        time.process_time() - cpu0,
    )
    loop.close()
    return result


def _ended(s: Sensor) -> bool:
    if s.alive:
        return False
    r = s.report
    if r.stop_reason == "crashed":
        return s.profile.rejoin_at is None
    return r.lives > 0


def _child(
    cfg: EmulationConfig,
    entries: Any,
    n: int,
    stop: Any,
    deadline: Any,
    t0: float,
    out: Any,
) -> None:
    import signal

    # the parent turns Ctrl-C and SIGTERM into the shared stop event
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        out.put(run_shard(cfg, entries, n, stop, deadline, t0))
    except Exception as exc:
        out.put(ShardResult(sensors=len(entries), error=f"{type(exc).__name__}: {exc}"))


class LoopEmulation:
    """N emulated sensors on event loops over ``processes`` processes."""

    def __init__(
        self,
        broker: str | ConnectionOptions,
        job: str,
        *,
        processes: int = 1,
        **options: Any,
    ) -> None:
        if isinstance(broker, str):
            broker = ConnectionOptions(broker=broker)
        self.config = EmulationConfig(broker, job, **options)
        cfg = self.config
        if not 1 <= cfg.n_workers <= MAX_LOOP_SENSORS:
            raise ValueError(f"n_workers must be in 1..{MAX_LOOP_SENSORS}")
        if not 1 <= processes <= 64:
            raise ValueError("processes must be in 1..64")
        if cfg.duration is not None and not cfg.duration > 0:
            raise ValueError("duration must be > 0 seconds (or None)")
        if cfg.batch < 1 or cfg.max_iterations < 0:
            raise ValueError("batch >= 1 and max_iterations >= 0 required")
        broker.check()
        board_power(cfg.board)  # a known board, or ValueError now
        if broker.starts_broker:
            raise ValueError(f"need an mqtt[s]:// broker URL, got {broker.broker!r}")
        if cfg.profiles is not None:
            self.scenario = Scenario("custom", "given profiles", dict(cfg.profiles))
        else:
            self.scenario = make_scenario(cfg.scenario, cfg.n_workers, cfg.seed)
        links = {"rate": cfg.link_rate, "delay": cfg.link_delay, "loss": cfg.link_loss}
        shaped = with_links(self.scenario.profiles, **links)
        if any(is_shaped(p) for p in shaped.values()):
            raise ValueError("shaped links (--link-rate) need the thread engine")
        self.scenario = replace(self.scenario, profiles=with_compute(shaped, cfg))
        self.processes = min(processes, self.scenario.n_workers)
        if cfg.model is not None:
            self.config = replace(
                cfg, model=_complete(cfg.model, cfg.dataset, cfg.seed)
            )
        self.reports = {
            wid: SensorReport(wid, profile_class(p))
            for wid, p in self.scenario.profiles.items()
        }
        self.results: list[ShardResult] = []
        self._t0 = 0.0
        self._stop: Any = None
        self._runner: threading.Thread | None = None
        self._procs: list[Any] = []
        self._out: Any = None

    def start(self) -> LoopEmulation:
        if self._t0:
            raise RuntimeError("this emulation was already started")
        self._t0 = time.monotonic()
        cfg = self.config
        deadline = None if cfg.duration is None else self._t0 + cfg.duration
        items = [
            (i, wid, p) for i, (wid, p) in enumerate(self.scenario.profiles.items())
        ]
        n = len(items)
        if self.processes == 1:
            self._stop = threading.Event()
            self._runner = threading.Thread(
                target=self._run_here,
                args=(items, n, deadline),
                name="emulate-loop",
                daemon=True,
            )
            self._runner.start()
            return self
        ctx = mp.get_context("spawn")
        self._stop = ctx.Event()
        self._out = ctx.Queue()
        for k in range(self.processes):
            part = items[k :: self.processes]
            proc = ctx.Process(
                target=_child,
                args=(cfg, part, n, self._stop, deadline, self._t0, self._out),
                daemon=True,
            )
            proc.start()
            self._procs.append(proc)
        self._runner = threading.Thread(
            target=self._collect_children, name="emulate-collect", daemon=True
        )
        self._runner.start()
        return self

    def _run_here(self, items: Any, n: int, deadline: float | None) -> None:
        try:
            self._take(run_shard(self.config, items, n, self._stop, deadline, self._t0))
        except Exception as exc:
            log.exception("emulation failed")
            self._take(
                ShardResult(sensors=len(items), error=f"{type(exc).__name__}: {exc}")
            )

    def _collect_children(self) -> None:
        got = 0
        while got < len(self._procs):
            try:
                self._take(self._out.get(timeout=0.5))
                got += 1
            except queue.Empty:
                if not any(p.is_alive() for p in self._procs):
                    break
        for p in self._procs:
            p.join(5)

    def _take(self, res: ShardResult) -> None:
        self.results.append(res)
        for d in res.reports:
            self.reports[d["worker_id"]] = SensorReport(**d)
        if res.error:
            log.error("emulator process failed: %s", res.error)

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        if self._runner is not None:
            self._runner.join(timeout)
        return not self.running

    @property
    def running(self) -> bool:
        return self._runner is not None and self._runner.is_alive()

    def elapsed(self) -> float:
        return time.monotonic() - self._t0 if self._t0 else 0.0

    @property
    def cost(self) -> dict[str, float | None]:
        """The emulator's own cost: CPU ms per update, resident KiB per sensor."""
        cpu = sum(r.cpu_s for r in self.results)
        pushes = sum(r.stats.get("pushes", 0) for r in self.reports.values())
        sensors = sum(r.sensors for r in self.results) or 1
        # while every sensor lived: at the end their links and buffers are gone
        rss = sum(max(0, r.rss_peak - r.rss_base) for r in self.results)
        trips = [t for r in self.results for t in r.round_trips]
        p50, p95 = percentiles(trips, (50.0, 95.0))
        return {
            "processes": float(len(self.results)),
            "cpu_s": round(cpu, 3),
            "updates": float(pushes),
            "cpu_ms_per_update": round(1000 * cpu / pushes, 4)
            if pushes
            else float("nan"),
            "rss_kib_per_sensor": round(rss / 1024 / sensors, 1),
            "rss_mib_total": round(sum(r.rss_end for r in self.results) / 2**20, 1),
            "round_trip_ms_p50": None if p50 is None else round(1000 * p50, 2),
            "round_trip_ms_p95": None if p95 is None else round(1000 * p95, 2),
        }
