"""The thread engine of `edgeps emulate`: one thread per emulated sensor.

Each sensor is a thread that runs the shared ``Worker`` loop with a paho
transport and the C-kernel trainer, shaped by a ``WorkerProfile`` from
``edgeps.workloads.scenarios``: its compute is stretched to the profile's
iteration time (straggler factor, transient interference, a competing
process's bursts on the emulation's clock) by sleeping after the real
gradient; its link delays, jitters and drops publishes (QoS1 drops become
retransmissions), or its MQTT bytes cross a shaped link both ways
(``--link-rate``, ``edgeps.netem.sensor_links``); and it crashes (the TCP link
is cut, so the broker fires its last will) and rejoins as a new process (a new
session) at the profile's times. The loop engine (``edgeps.emulate.runner``)
runs thousands of sensors from one event loop per process instead.

Threads, not processes: an emulated sensor spends almost all its time
sleeping or waiting on the broker, and one process holds numpy, paho and the
dataset once instead of N times (tools/emulate_footprint.py measures both).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from edgeps_worker import wire

from edgeps.emulate.common import (
    EmulationConfig,
    SensorReport,
    partition_scheme,
    profile_class,
    with_compute,
)
from edgeps.emulate.usage import MeteredLink, UsageMeter, usage_report
from edgeps.netem.impair import ImpairedTransport, LinkProfile
from edgeps.netem.links import is_shaped, with_links
from edgeps.netem.sensor_links import SensorLinks
from edgeps.pyworker.trainer import EmulatedTrainer, NativeTrainer
from edgeps.runtime.model_forms import complete_model
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink
from edgeps.workloads.energy import board_power
from edgeps.workloads.scenarios import Scenario, WorkerProfile, make_scenario

log = logging.getLogger("edgeps.emulate.emulation")

MAX_SENSORS = 256  # one thread and one broker connection each
THREADS_UP_TO = 64  # --engine auto: above this, one event loop per process


class _LifeStop:
    """The stop callback of one life; at ``crash_at`` it cuts the link like a crash."""

    def __init__(
        self,
        end: threading.Event,
        link: ImpairedTransport,
        crash_at: float | None,
        elapsed: Callable[[], float],
    ) -> None:
        self.end = end
        self.link = link
        self.crash_at = crash_at
        self.elapsed = elapsed
        self.crashed = False

    def __call__(self) -> bool:
        if self.end.is_set():
            return True
        if self.crash_at is not None and self.elapsed() >= self.crash_at:
            if not self.crashed:
                self.link.abort()  # no DISCONNECT: the broker sends the last will
                self.crashed = True
            return True
        return False


class Emulation:
    """N emulated sensors against one broker and job: start(), stop(), join().

    ``broker`` is a URL or the full `ConnectionOptions` (TLS, credentials).
    Ends by itself when every sensor stopped (MODEL "done", max_iterations)
    or ``duration`` seconds after ``start()``.
    """

    def __init__(
        self, broker: str | ConnectionOptions, job: str, **options: Any
    ) -> None:
        if isinstance(broker, str):
            broker = ConnectionOptions(broker=broker)
        self.config = EmulationConfig(broker, job, **options)
        cfg = self.config
        if not 1 <= cfg.n_workers <= MAX_SENSORS:
            raise ValueError(f"n_workers must be in 1..{MAX_SENSORS}")
        if cfg.duration is not None and not cfg.duration > 0:
            raise ValueError("duration must be > 0 seconds (or None)")
        if cfg.batch < 1 or cfg.max_iterations < 0:
            raise ValueError("batch >= 1 and max_iterations >= 0 required")
        if cfg.pace:
            raise ValueError("pace needs the loop engine (--engine loop)")
        board_power(cfg.board)  # a known board, or ValueError now
        if not 256 <= cfg.max_chunk <= wire.MAX_MESSAGE // 2:
            raise ValueError(f"max_chunk must be in 256..{wire.MAX_MESSAGE // 2}")
        from edgeps.pyworker.localdata import load_emulated

        # validate broker URL and TLS flags now rather than in N threads
        MqttLink(cfg.connection, "probe")
        if cfg.profiles is not None:
            if not 1 <= len(cfg.profiles) <= MAX_SENSORS:
                raise ValueError(f"give 1..{MAX_SENSORS} profiles")
            for wid in cfg.profiles:
                if not isinstance(wid, str) or not wire.valid_id(wid):
                    raise ValueError(f"bad worker id {wid!r}")
            self.scenario = Scenario("custom", "given profiles", dict(cfg.profiles))
        else:
            self.scenario = make_scenario(cfg.scenario, cfg.n_workers, cfg.seed)
        links = {"rate": cfg.link_rate, "delay": cfg.link_delay, "loss": cfg.link_loss}
        shaped = with_links(self.scenario.profiles, **links)
        self.scenario = replace(self.scenario, profiles=with_compute(shaped, cfg))
        self.links = SensorLinks(cfg.connection, self.scenario.profiles, seed=cfg.seed)
        self._make_transport = lambda wid: MqttLink(self.links.options(wid), wid)
        n = self.scenario.n_workers
        scheme = partition_scheme(cfg)
        self._shards = []
        for i in range(n):
            data, spec = load_emulated(f"{cfg.dataset}:{i}/{n}", cfg.seed, scheme)
            self._shards.append(data)
        self.dataset_model = spec
        self.model: str | None = None  # None: each sensor takes the job's MODEL
        if cfg.model is not None:
            from edgeps.kernels import ModelSpec

            sizes = ModelSpec.parse(spec)
            n_classes = max(2, sizes.n_classes)
            shape = self._shards[0].shape
            full = complete_model(cfg.model, sizes.n_features, n_classes, shape)
            self.model = str(ModelSpec.parse(full))
        self.reports = {
            wid: SensorReport(wid, profile_class(p))
            for wid, p in self.scenario.profiles.items()
        }
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0

    # -- public API --

    def start(self) -> Emulation:
        if self._threads:
            raise RuntimeError("this emulation was already started")
        self._t0 = time.monotonic()
        if self.config.duration is not None:
            timer = threading.Timer(self.config.duration, self._stop.set)
            timer.daemon = True
            timer.start()
        self.links.start()
        for i, (wid, profile) in enumerate(self.scenario.profiles.items()):
            th = threading.Thread(
                target=self._sensor, args=(i, wid, profile), name=f"sensor-{wid}"
            )
            th.daemon = True
            self._threads.append(th)
            th.start()
        return self

    def stop(self) -> None:
        """Ask every sensor to leave (BYE) and end."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for all sensors; True when they all ended within ``timeout``."""
        end = None if timeout is None else time.monotonic() + timeout
        for th in self._threads:
            left = None if end is None else max(0.0, end - time.monotonic())
            th.join(left)
        if self.running:
            return False
        self.links.close({wid: r.link for wid, r in self.reports.items()})
        return True

    @property
    def running(self) -> bool:
        return any(th.is_alive() for th in self._threads)

    def elapsed(self) -> float:
        return time.monotonic() - self._t0 if self._t0 else 0.0

    # -- one sensor --

    def _should_end(self) -> bool:
        return self._stop.is_set()

    def _sensor(self, index: int, wid: str, profile: WorkerProfile) -> None:
        report = self.reports[wid]
        try:
            self._lives(index, wid, profile, report)
        except Exception as exc:  # a broken sensor is reported, the rest go on
            log.exception("sensor %s failed", wid)
            report.error = f"{type(exc).__name__}: {exc}"
            report.stop_reason = "error"

    def _lives(
        self, index: int, wid: str, profile: WorkerProfile, report: SensorReport
    ) -> None:
        from edgeps_worker.worker import Worker

        from edgeps.pyworker.model_fetch import fetch_model
        from edgeps.security.keys import derive_worker_key

        cfg = self.config
        rng = np.random.default_rng([cfg.seed, index])
        key = derive_worker_key(cfg.hmac_key, wid) if cfg.hmac_key else None
        crash_at = profile.crash_at
        meter = UsageMeter()
        while not self._should_end():
            model = self.model
            if model is None:
                # a sensor ends only on a STOP for it: the retained MODEL is
                # unsigned, so its "done" only makes it wait for a running one
                job = fetch_model(
                    self._make_transport(wid),
                    cfg.job,
                    stop=self._should_end,
                    want_running=True,
                )
                if job is None:
                    return
                model = job.model
            trainer = EmulatedTrainer(
                NativeTrainer(model, self._shards[index], cfg.batch, cfg.seed + index),
                profile,
                rng,
                sleep=self._stop.wait,
                clock=self.elapsed,
            )
            p = profile
            impair = LinkProfile(p.link_delay, p.link_jitter, p.loss_p)
            link = ImpairedTransport(
                MeteredLink(self._make_transport(wid), meter, time.monotonic),
                LinkProfile() if is_shaped(p) else impair,
                seed=cfg.seed * 1009 + index,
                sleep=self._stop.wait,
            )
            stop = _LifeStop(self._stop, link, crash_at, self.elapsed)

            worker = Worker(
                link,
                trainer,
                cfg.job,
                wid,
                max_iterations=cfg.max_iterations,
                stop=stop,
                heartbeat_ms=cfg.heartbeat_ms,
                release_timeout_ms=cfg.release_timeout_ms,
                max_chunk=cfg.max_chunk,
                key=key,
                log=log.debug,
            )
            report.lives += 1
            meter.life_starts(time.monotonic())
            try:
                reason = worker.run()
            finally:
                meter.life_ends(time.monotonic())
                report.usage = usage_report(
                    meter.usage, profile, board=cfg.board,
                    sleep_at_barrier=cfg.sleep_at_barrier,
                )  # fmt: skip
            for name, value in worker.stats.items():
                report.add(name, int(value))
            report.retransmits += link.stats.retransmits
            report.clock = worker.clock
            report.last_loss = worker.last_loss
            report.stop_reason = "crashed" if stop.crashed else reason
            if not stop.crashed:
                return
            log.info("sensor %s crashed at %.1fs", wid, self.elapsed())
            crash_at = None
            if profile.rejoin_at is None:
                return
            wait = profile.rejoin_at - self.elapsed()
            if wait > 0 and self._stop.wait(wait):
                return
            log.info("sensor %s rejoins at %.1fs", wid, self.elapsed())
