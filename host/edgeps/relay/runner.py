"""Assemble and run one relay: the upstream worker thread and the site coordinator.

1. Read the central job's retained MODEL (as `edgeps worker` does).
2. Start the shared ``Worker`` on the central broker with a `RelayTrainer`
   in its own thread; its first release is the first central parameters.
3. Start the site parameter server (`SiteServer`, `SiteCoordinator`) on the
   site broker with them (and the central job's local rounds and card, which
   its WELCOME gave the trainer), and run its loop in the calling thread until
   the central job ends (its STOP ends the worker, which stops the site: MODEL
   "done" and a STOP to every board) or `stop()` is called.
"""

from __future__ import annotations

import logging
import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from edgeps_worker import wire_host as wire

from edgeps.core.balance import Balancer
from edgeps.core.norm_guard import NormGuard
from edgeps.policy import parse_policy
from edgeps.relay.fold import Round
from edgeps.relay.site import WAKE_TOPIC, SiteCoordinator, SiteServer, card_fields
from edgeps.relay.upstream import RelayTrainer
from edgeps.runtime.accounting import sys_subscriptions
from edgeps.runtime.coordinator import Settings
from edgeps.runtime.summary import Summary
from edgeps.runtime.welcome import LocalRounds
from edgeps.transport.broker import BrokerHandle, open_broker
from edgeps.transport.host_link import HostLink
from edgeps.transport.options import ConnectionOptions
from edgeps.transport.paho_link import MqttLink

log = logging.getLogger(__name__)


@dataclass
class RelayConfig:
    """One relay: where the central job and the site are, and the site's policy."""

    central: ConnectionOptions
    site: ConnectionOptions  # its broker may be auto/mosquitto/amqtt: started here
    job: str  # the central job
    relay_id: str  # this relay's worker id in the central job
    site_job: str | None = None  # the site's job id (default: the central one)
    policy: str = "bsp"  # the site's sync policy
    balance: bool = False  # assign each site board a batch from its speed
    min_fold: int = 0  # a round waits for this many gradients (or every live board)
    liveness_timeout: float = 10.0
    max_update_norm: float | None = None
    norm_guard: float = 10.0
    central_key: bytes | None = None  # the relay's own key in the central job
    site_key: bytes | None = None  # the site's master key
    max_chunk: int = 1 << 16  # upstream messages (a relay is no microcontroller)
    site_max_chunk: int = 4096  # for boards that announce none
    heartbeat_ms: int = 5000
    release_timeout_ms: int = 15000
    send_rejects: bool = True

    @property
    def site_job_id(self) -> str:
        return self.site_job or self.job


@dataclass
class RelaySummary:
    """What `edgeps relay --json` prints: the upstream worker and the site run."""

    relay_id: str
    stop_reason: str
    upstream: dict[str, Any] = field(default_factory=dict)
    site: Summary | None = None


class Relay:
    """One relay; `run()` blocks until the central job ends or `stop()`."""

    def __init__(
        self, cfg: RelayConfig, *, announce: Callable[[str], object] | None = None
    ) -> None:
        for what, value in (
            ("job", cfg.job),
            ("relay id", cfg.relay_id),
            ("site job", cfg.site_job_id),
        ):
            if not wire.valid_id(value):
                raise ValueError(f"{what} must match [A-Za-z0-9_-]{{1,32}}: {value!r}")
        parse_policy(cfg.policy)  # a bad policy fails now, not after joining
        cfg.central.check()
        cfg.site.check()
        self.cfg = cfg
        self.announce = announce  # told where the site's boards connect
        self._stop = threading.Event()
        self.ready = threading.Event()  # set once the site serves its boards
        self.coordinator: SiteCoordinator | None = None
        self.worker: Any = None
        self.trainer: RelayTrainer | None = None
        self.site_broker: BrokerHandle | None = None
        self._beats = [0]  # HEARTBEATs sent upstream while waiting for rounds

    def stop(self) -> None:
        self._stop.set()
        coord = self.coordinator
        if coord is not None:
            coord.stop()

    def run(self) -> RelaySummary:
        from edgeps_worker.worker import Worker

        from edgeps.pyworker.model_fetch import fetch_model

        cfg = self.cfg
        job = fetch_model(
            MqttLink(cfg.central, cfg.relay_id), cfg.job, stop=self._stop.is_set
        )
        if job is None or job.state != "running":
            self.ready.set()
            reason = "stopped" if job is None else "done"
            return RelaySummary(cfg.relay_id, reason)
        round_ = Round(job.n_params)
        trainer = RelayTrainer(
            job.n_params,
            job.model,
            round_,
            self._stop.is_set,
            heartbeat_s=cfg.heartbeat_ms / 1000,
        )
        self.trainer = trainer
        transport = MqttLink(cfg.central, cfg.relay_id)
        worker = Worker(
            transport,
            trainer,
            cfg.job,
            cfg.relay_id,
            stop=self._stop.is_set,
            heartbeat_ms=cfg.heartbeat_ms,
            release_timeout_ms=cfg.release_timeout_ms,
            max_chunk=cfg.max_chunk,
            key=cfg.central_key,
            log=log.info,
        )
        self.worker = worker
        beats = [0]

        def beat() -> None:
            beats[0] += _heartbeat(worker, transport, cfg)

        trainer.beat = beat
        self._beats = beats
        result: dict[str, str] = {}

        def upstream() -> None:
            try:
                result["reason"] = str(worker.run())
            except Exception:  # the site must still be told to stop
                log.exception("relay %s: upstream worker failed", cfg.relay_id)
                result["reason"] = "error"
            finally:
                self.stop()

        thread = threading.Thread(target=upstream, name=f"relay-{cfg.relay_id}")
        thread.daemon = True
        thread.start()
        site: Summary | None = None
        try:
            if round_.wait_offer(self._stop.is_set):
                site = self._serve_site(round_, job.model, trainer)
        finally:
            self.ready.set()
            self._stop.set()
            thread.join(30)
        return RelaySummary(
            cfg.relay_id,
            result.get("reason", "stopped"),
            self._upstream_report(round_),
            site,
        )

    def _serve_site(self, round_: Round, model: str, trainer: RelayTrainer) -> Summary:
        cfg = self.cfg
        # the first offer came from the trainer's first round, so the central
        # WELCOME's local rounds and card are known by now
        local = LocalRounds(*trainer.local) if trainer.local else LocalRounds()
        first = round_.take_central()
        assert first is not None
        policy = parse_policy(cfg.policy)
        server = SiteServer(
            first,
            round_,
            policy=policy,
            balancer=Balancer.for_policy(policy) if cfg.balance else None,
            lr=1.0,
            liveness_timeout=cfg.liveness_timeout,
            max_update_norm=cfg.max_update_norm,
            norm_guard=NormGuard(cfg.norm_guard) if cfg.norm_guard > 0 else None,
        )
        # a URL, or auto/mosquitto/amqtt: a broker started here (closed below)
        broker = self.site_broker = open_broker(cfg.site.broker)
        link: HostLink | None = None
        try:
            link = HostLink(
                cfg.site.at(broker.url),
                client_id=f"edgeps-relay-{cfg.site_job_id}",
                subscriptions=[
                    (wire.topic_up_wildcard(cfg.site_job_id), 1),
                    *sys_subscriptions(),
                ],
            )
            link.start()
            settings = Settings(
                job=cfg.site_job_id,
                model=model,
                max_chunk=cfg.site_max_chunk,
                send_rejects=cfg.send_rejects,
                hmac_key=cfg.site_key,
                local=local,
            )
            coord = SiteCoordinator(
                server,
                link,
                settings,
                policy_name=str(server.policy.describe()),
                min_fold=cfg.min_fold,
                card=card_fields(trainer.scale, trainer.classes),
            )
            self.coordinator = coord
            link.on_up = coord.link_up
            inbox = link.inbox
            round_.wake = lambda: inbox.put((WAKE_TOPIC, b""))
            rounds = (
                f", local rounds {local.steps} steps / {local.epochs} epochs / "
                f"{local.seconds} s at lr {local.lr}"
                if local.active
                else ""
            )
            text = (
                f"relay {cfg.relay_id}: site job {cfg.site_job_id} on {broker.url}, "
                f"policy {coord.policy_name}{rounds}; boards: edgeps worker --broker "
                f"{broker.url} --job {cfg.site_job_id} --id ID ..."
            )
            log.info("%s", text)
            if self.announce is not None:
                self.announce(text)
            self.ready.set()
            if self._stop.is_set():
                coord.stop()
            summary = coord.run()
            link.flush(5.0)
            return summary
        finally:
            round_.wake = None
            if link is not None:
                link.stop()
            broker.close()  # stops only a broker started here

    def _upstream_report(self, round_: Round) -> dict[str, Any]:
        worker, trainer = self.worker, self.trainer
        times = list(trainer.round_times) if trainer is not None else []
        return {
            "clock": int(worker.clock) if worker is not None else 0,
            "stats": dict(worker.stats) if worker is not None else {},
            "rounds": round_.rounds,
            "folded": round_.folded,
            "late": round_.late,
            "unsent": round_.count,  # folded when the job ended, never pushed
            "fan_in": round_.folded / round_.rounds if round_.rounds else 0.0,
            "largest_round": round_.largest,
            "delta_rounds": round_.delta_rounds,
            "round_s_median": statistics.median(times) if times else None,
            "fan_outs": self.coordinator.fan_outs if self.coordinator else 0,
            "round_heartbeats": self._beats[0],
            # the central job's (steps, epochs, seconds, lr), handed to the site
            "local": list(trainer.local) if trainer and trainer.local else None,
        }


def _heartbeat(worker: Any, transport: MqttLink, cfg: RelayConfig) -> int:
    """A HEARTBEAT upstream while the relay waits for its site round; 1 if sent."""
    if worker.session is None:
        return 0
    payload = wire.encode_heartbeat(
        cfg.job, cfg.relay_id, worker.session, worker.clock, cfg.central_key
    )
    try:
        transport.publish(worker.up, payload, 1)
    except OSError as exc:  # the worker loop finds the lost link by itself
        log.info("relay %s: heartbeat failed: %s", cfg.relay_id, exc)
        return 0
    return 1
