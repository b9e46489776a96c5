"""One emulated sensor on the event loop: its lives, links, compute and crashes.

A `Sensor` drives the shared ``Worker`` through its step API. Emulated
compute never blocks the loop: the trainer computes the real gradient, then
its "sleep" (the rest of the profile's iteration time) becomes a hold on the
link, so the UPDATE goes out when the board would have finished; messages
that arrive meanwhile wait, as on a board busy computing. With ``pace``
that time counts from when the message had surely arrived (the select that
found it readable), not from when the loop got to this sensor
(`edgeps.emulate.timers.paced_rest`). A lost link is retried with the
worker's backoff; at the profile's ``crash_at`` the TCP link is cut without
DISCONNECT (the broker fires the last will) and at ``rejoin_at`` a new
process (a new Worker instance, a new session) joins.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from edgeps.core.defaults import JOB
from edgeps.emulate.loop import EventLoop, LoopLink
from edgeps.emulate.timers import paced_rest
from edgeps.emulate.usage import UsageMeter, usage_report
from edgeps.netem.impair import ImpairedTransport, LinkProfile
from edgeps.pyworker.localdata import LocalData
from edgeps.transport.options import ConnectionOptions
from edgeps.workloads.scenarios import WorkerProfile

log = logging.getLogger(__name__)

TICK = 1.0  # seconds between run_timers calls (heartbeat and release timeout)


@dataclass
class SensorEnv:
    """What all sensors of one loop share."""

    loop: EventLoop
    options: ConnectionOptions
    job: str
    model: str
    t0: float  # loop time the emulation started (crash/rejoin times count from it)
    batch: int = JOB.batch
    seed: int = 0
    max_iterations: int = 0
    heartbeat_ms: int = 5000
    release_timeout_ms: int = 15000
    max_chunk: int = 1 << 16
    hmac_key: bytes | None = None
    # each step ends its drawn time after its message arrived, the loop's own
    # wait to get to this sensor included (edgeps.emulate.timers.paced_rest)
    pace: bool = False
    board: str = "esp32"  # the energy model of each sensor's usage
    sleep_at_barrier: bool = False
    ending: bool = False
    # seconds from an UPDATE leaving a sensor to the next release it computes on
    round_trips: deque[float] = field(default_factory=lambda: deque(maxlen=1 << 15))


class Sensor:
    """One emulated sensor; ``report`` (a SensorReport) collects what it did."""

    def __init__(
        self,
        env: SensorEnv,
        index: int,
        wid: str,
        profile: WorkerProfile,
        data: LocalData,
        report: Any,
    ) -> None:
        self.env = env
        self.index = index
        self.wid = wid
        self.profile = profile
        self.data = data
        self.report = report
        self.rng = np.random.default_rng([env.seed, index])
        self.worker: Any = None
        self.link: LoopLink | None = None
        self.gen = 0  # life/link generation: stale timers check it
        self.alive = False
        self.crash_at = profile.crash_at
        self.meter = UsageMeter()
        self._inbox: deque[tuple[str, bytes, float]] = deque()  # and its arrival
        self._backoff = 0.25
        self._resume_at: float | None = None
        self._sent_at: float | None = None  # when the last UPDATE left (held)
        self._fed = (0.0, 0.0)  # (arrived, started) of the message being handled

    # -- scheduling helpers --

    def _later(self, at: float, fn: Callable[[], object]) -> None:
        gen = self.gen

        def call() -> None:
            if gen == self.gen and self.alive:
                fn()

        self.env.loop.timers.at(at, call)

    def start(self, at: float) -> None:
        self.env.loop.timers.at(at, self._new_life)

    # -- lives --

    def _new_life(self) -> None:
        from edgeps_worker.worker import Worker

        from edgeps.pyworker.trainer import EmulatedTrainer, NativeTrainer
        from edgeps.security.keys import derive_worker_key

        env = self.env
        if env.ending:
            return
        p = self.profile
        inner = NativeTrainer(env.model, self.data, env.batch, env.seed + self.index)
        trainer = EmulatedTrainer(
            inner, p, self.rng, sleep=self._compute, clock=self._since_start
        )
        impair = None
        lp = LinkProfile(p.link_delay, p.link_jitter, p.loss_p)
        if not lp.is_perfect:
            impair = ImpairedTransport(None, lp, seed=env.seed * 1009 + self.index)
        self.gen += 1
        self.alive = True
        self._inbox.clear()
        self.link = LoopLink(
            env.loop, env.options, self.wid, self._deliver, self._lost, impair,
            meter=self.meter,
        )  # fmt: skip
        key = derive_worker_key(env.hmac_key, self.wid) if env.hmac_key else None
        self.worker = Worker(
            self.link,
            trainer,
            env.job,
            self.wid,
            max_iterations=env.max_iterations,
            heartbeat_ms=env.heartbeat_ms,
            release_timeout_ms=env.release_timeout_ms,
            max_chunk=env.max_chunk,
            key=key,
            log=log.debug,
        )
        self.report.lives += 1
        self.report.stop_reason = ""
        now = env.loop.now()
        self.meter.life_starts(now)
        if self.crash_at is not None:
            self._later(max(now, env.t0 + self.crash_at), self._crash)
        self._connect()
        self._later(now + TICK * (0.5 + self.rng.random()), self._tick)

    def _connect(self) -> None:
        self._sent_at = None
        self._inbox.clear()  # what the last link brought belongs to its session
        try:
            self.worker.start_link()
        except OSError as exc:
            log.debug("%s: connect failed: %s", self.wid, exc)
            self._retry()
            return
        self._backoff = 0.25

    def _retry(self) -> None:
        self.worker.stats["reconnects"] += 1
        delay = self._backoff * (0.8 + 0.4 * self.rng.random())
        self._backoff = min(self._backoff * 2, 16.0)
        self._later(self.env.loop.now() + delay, self._connect)

    def _lost(self) -> None:
        if self.alive and not self.env.ending:
            self._later(self.env.loop.now(), self._retry)

    def _crash(self) -> None:
        assert self.link is not None
        self.link.abort()  # no DISCONNECT: the broker sends the last will
        self._collect("crashed")
        log.info("sensor %s crashed", self.wid)
        self.crash_at = None
        if self.profile.rejoin_at is not None:
            at = self.env.t0 + self.profile.rejoin_at
            self.env.loop.timers.at(max(at, self.env.loop.now()), self._new_life)

    def _end(self, reason: str) -> None:
        """The worker stopped (done, iterations, mismatch): BYE once all is sent."""
        assert self.link is not None
        q = self.link.sendq
        if self.link.connected and (self.link.busy() or q.items):
            self._later(max(q.hold_until, q.last_at), lambda: self._end(reason))
            return
        self.worker.leave()
        self._collect(reason)

    def finish(self) -> None:
        """The emulation ends: leave (BYE, DISCONNECT) if still alive."""
        if self.alive and self.worker is not None:
            if self.worker.stop_reason is None:
                self.worker.stop_reason = "stopped"
            self.worker.leave()
            self._collect(self.worker.stop_reason)

    def _collect(self, reason: str) -> None:
        self.alive = False
        self.gen += 1
        w, r = self.worker, self.report
        for name, value in w.stats.items():
            r.add(name, int(value))
        r.retransmits += self.link.retransmits if self.link is not None else 0
        r.clock = w.clock
        r.last_loss = w.last_loss
        r.stop_reason = reason
        self.meter.life_ends(self.env.loop.now())
        r.usage = usage_report(
            self.meter.usage, self.profile, board=self.env.board,
            sleep_at_barrier=self.env.sleep_at_barrier,
        )  # fmt: skip

    def _since_start(self) -> float:
        """Seconds since the emulation started: the clock of a profile's bursts."""
        return self.env.loop.now() - self.env.t0

    # -- events --

    def _compute(self, seconds: float) -> None:
        """The trainer's rest-of-iteration "sleep": hold the link, resume after."""
        assert self.link is not None
        now = self.env.loop.now()
        if self.env.pace:
            arrived, started = self._fed
            seconds = paced_rest(seconds, started, arrived)
            now = arrived if arrived > 0 else now  # the round trip ends on arrival
        if self._sent_at is not None and now > self._sent_at:
            self.env.round_trips.append(now - self._sent_at)
        self._fed = (0.0, 0.0)
        self.link.hold(seconds)
        at = self.link.sendq.hold_until
        self._sent_at = at
        if self._resume_at is None or at > self._resume_at:
            self._resume_at = at
            self._later(at, self._resume)

    def _resume(self) -> None:
        done = self._resume_at or self.env.loop.now()  # when the compute ended
        self._resume_at = None
        while self._inbox and self.alive:
            assert self.link is not None
            if self.link.busy():
                return  # a message started another compute: it resumes us
            topic, payload, arrived = self._inbox.popleft()
            self._feed(topic, payload, max(arrived, done))

    def _deliver(self, topic: str, payload: bytes) -> None:
        assert self.link is not None
        arrived = self.link.arrived_by
        if self._inbox or self.link.busy():
            self._inbox.append((topic, payload, arrived))
            return
        self._feed(topic, payload, arrived)

    def _feed(self, topic: str, payload: bytes, arrived: float) -> None:
        self._fed = (arrived, self.env.loop.now())
        try:
            self.worker.feed(topic, payload)
            self.worker.run_timers()
        except OSError as exc:
            log.debug("%s: link lost: %s", self.wid, exc)
            if self.link is not None:
                self.link.abort()
            self._lost()
            return
        except Exception as exc:  # a broken sensor is reported, the rest go on
            log.exception("sensor %s failed", self.wid)
            self.report.error = f"{type(exc).__name__}: {exc}"
            if self.link is not None:
                self.link.abort()
            self._collect("error")
            return
        if self.worker.stop_reason is not None:
            self._end(self.worker.stop_reason)

    def _tick(self) -> None:
        assert self.link is not None
        now = self.env.loop.now()
        self._later(now + TICK, self._tick)
        if self.link.busy() or not self.link.connected:
            return
        self._fed = (0.0, 0.0)
        try:
            self.worker.run_timers()
        except OSError:
            self.link.abort()
            self._lost()
