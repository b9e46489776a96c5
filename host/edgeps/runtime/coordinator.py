"""The coordinator loop: the one thread that owns the ParameterServer.

It takes raw messages from the MQTT client's inbox, lets ``Ingest`` turn
them into core events, hands each to ``ParameterServer.handle`` with
``now = time.monotonic()``, and carries out the actions the core returns as
the MQTT ``ActionSink``: a Release publishes its parameters to each named
worker's down topic. Errors of the core are bugs and raise: only network
input is counted and dropped, at ingest.

Around that it evaluates, snapshots metrics, checkpoints and decides when the
job is over (target accuracy, time limit, or a stop request).
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
from edgeps_worker import wire

from edgeps.codecs import parse_compress
from edgeps.core.defaults import JOB
from edgeps.core.divergence import DivergenceWatch
from edgeps.core.server import ParameterServer
from edgeps.core.sink import carry_out
from edgeps.core.types import (
    Applied,
    Held,
    Join,
    Leave,
    Push,
    Rejected,
    Release,
    Tick,
    WorkerLeft,
)
from edgeps.model.card import ModelCard
from edgeps.observe.metrics import MetricsWriter, Progress
from edgeps.observe.privacy import make_ledger
from edgeps.runtime import reports
from edgeps.runtime.accounting import Accounting
from edgeps.runtime.checkpoint_log import CheckpointLog
from edgeps.runtime.gc_freeze import GcFreeze
from edgeps.runtime.inbound import Inbound
from edgeps.runtime.ingest import Ingest
from edgeps.runtime.model_guard import ModelGuard
from edgeps.runtime.other_serves import OtherServes
from edgeps.runtime.outbox import Outbox
from edgeps.runtime.peers import Peers
from edgeps.runtime.scaler_gate import ScalerGate
from edgeps.runtime.summary import Summary
from edgeps.runtime.welcome import LocalRounds, card_fields
from edgeps.runtime.worker_rows import MAX_WORKER_ROWS

log = logging.getLogger(__name__)


# core refusals of a HELLO that end the worker, and the STOP reason it gets
_STOPS = {
    "duplicate_id": "duplicate_id",
    "model_mismatch": "model",
    "codec_mismatch": "codec",
}


class Link(Protocol):
    """What the coordinator needs from its MQTT client (HostLink has it)."""

    def get(self, timeout: float) -> tuple[str, bytes] | None: ...
    def get_nowait(self) -> tuple[str, bytes] | None: ...
    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> Any: ...


@dataclass
class Settings:
    """How one job runs: ids, stop conditions and housekeeping periods (seconds)."""

    job: str
    model: str  # model spec text, announced in the retained MODEL message
    target_accuracy: float | None = None
    max_time: float | None = None
    max_updates: int | None = None  # stop after this many applied updates (benchmarks)
    eval_interval: float = 0.5
    tick_interval: float = 0.2
    metrics_interval: float = 1.0
    checkpoint_interval: float = 30.0
    checkpoint_path: str | None = None  # named in the log and the summary
    max_chunk: int = 4096  # for workers that did not announce their own
    send_rejects: bool = True
    hmac_key: bytes | None = None  # the master key: each worker's is derived
    run_id: int | None = None  # random per run when None
    compress: str = "f32"  # the UPDATE code workers must use (edgeps.codecs)
    params_code: int = 1  # PARAMS code of releases (--compress-down; 1 = F32)
    shared_releases: bool = True  # one shared PARAMS per multi-worker release
    gc_freeze: bool = False  # long-lived objects out of gen-2 passes (serve CLI)
    divergence_backoff: float = JOB.divergence_backoff  # 1.0: never cut the step
    max_worker_rows: int = MAX_WORKER_ROWS  # per record and summary; the rest: one
    dp_delta: float = JOB.dp_delta  # differential privacy: epsilon at this delta
    dp_epsilon_budget: float = JOB.dp_epsilon_budget  # stop there; 0: no limit
    local: LocalRounds = LocalRounds()  # carried in every WELCOME
    card: ModelCard | None = None  # scaler and class names, in every WELCOME


class Coordinator:
    """Drive a ParameterServer from MQTT messages in real time."""

    def __init__(
        self,
        server: ParameterServer,
        link: Link,
        settings: Settings,
        *,
        policy_name: str,
        evaluate: Callable[[np.ndarray], float] | None = None,
        on_checkpoint: Callable[[Coordinator], None] | None = None,
        metrics: MetricsWriter | None = None,
        progress: Progress | None = None,
        observer: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        gate: ScalerGate | None = None,
    ) -> None:
        self.server = server
        self.gate = gate  # --scaler-from workers: HELLOs wait for the scaler
        self.link = link
        self.settings = settings
        self.policy_name = policy_name
        self.evaluate = evaluate
        self.on_checkpoint = on_checkpoint
        self.checkpoints = CheckpointLog(settings.checkpoint_path)
        self.metrics = metrics
        self.progress = progress
        self.observer = observer  # gets each snapshot (a dashboard's LatestState)
        self.clock = clock
        self.peers = Peers(
            settings.job, max_chunk=settings.max_chunk, master_key=settings.hmac_key
        )
        self.ingest = Ingest(
            job=settings.job,
            n_params=server.n_params,
            model=settings.model,
            peers=self.peers,
            compress=parse_compress(settings.compress),
            params_code=settings.params_code,
            local=settings.local.active,
        )
        self.accounting = Accounting(
            settings.job, lambda wid: server.worker_state(wid) is not None
        )
        self.run_id = settings.run_id or secrets.randbits(64) or 1
        self.stop_event = threading.Event()
        self.applied = 0
        self.outbox = Outbox(
            link,
            self.peers,
            model=settings.model,
            run=self.run_id,
            send_rejects=settings.send_rejects,
            params_code=settings.params_code,
            shared=settings.shared_releases,
            welcome=settings.local.welcome_fields() | card_fields(settings.card),
        )
        self.rejected: Counter[str] = Counter()
        self.inbound = Inbound()
        self.staleness_counts: Counter[int] = Counter()  # applied updates by staleness
        self.accuracy: float | None = None
        self.watch = DivergenceWatch(backoff=settings.divergence_backoff)
        self.first_applied_at: float | None = None
        self.last_applied_at: float | None = None
        self._t0 = clock()
        self._last_rate = (self._t0, 0)
        self._rate = 0.0
        self._relink = threading.Event()  # set by `link_up`, on the network thread
        self.model_republished = 0
        self.model_topic = wire.topic_model(settings.job)
        self.model_guard = ModelGuard()  # our retained MODEL stays ours
        # the job's MODEL topic, when the link subscribes to it: another serve
        self.other_serves = OtherServes(settings.job, self.run_id)
        self.gc = GcFreeze(enabled=settings.gc_freeze)  # edgeps.runtime.gc_freeze
        dp = server.model.dp  # the accountant of --dp (edgeps.observe.privacy)
        self.privacy = (
            None
            if dp is None
            else make_ledger(dp.mode, settings.dp_delta, settings.dp_epsilon_budget)
        )
        if dp is not None and self.budget_spent():
            raise ValueError(
                f"--dp-epsilon-budget {settings.dp_epsilon_budget:g} allows no "
                f"update at --dp-noise {dp.noise:g}: raise either"
            )

    # ---- outgoing messages: the MQTT ActionSink
    @property
    def releases_sent(self) -> int:
        return self.outbox.releases_sent

    def publish_model(self, state: str) -> None:
        """Retained MODEL message: job state, model spec and current version."""
        self.outbox.model(state, self.server.version, self.server.n_params)
        if self.outbox.last_model is not None:
            self.model_guard.published(self.outbox.last_model)

    def _restore_model(self, now: float) -> None:
        # another retained MODEL (a forged "done") replaced ours: put ours back
        payload = self.outbox.last_model
        if payload is None:
            return
        self.link.publish(self.model_topic, payload, 1, True)
        self.model_guard.restored(payload, now)
        self.ingest.drop("foreign_model", "retained MODEL replaced by another")

    def link_up(self) -> None:
        """The link is up again (HostLink's ``on_up``): republish MODEL in the loop."""
        self._relink.set()

    def _republish_model(self) -> None:
        # a broker restarted without persistence lost the retained MODEL, and a
        # worker that starts now would wait for it forever
        self._relink.clear()
        self.model_republished += 1
        log.info("link up again: MODEL republished")
        self.publish_model("running")

    def on_release(self, action: Release) -> None:
        self.outbox.release(action)
        self.inbound.released(action, self.clock())

    def on_applied(self, action: Applied) -> None:
        self.applied += 1
        self.staleness_counts[action.staleness] += 1
        self.last_applied_at = self.clock()
        if self.first_applied_at is None:
            self.first_applied_at = self.last_applied_at

    def on_rejected(self, action: Rejected) -> None:
        self.rejected[action.reason] += 1
        stop = _STOPS.get(action.reason)
        if stop is not None:
            # a refused HELLO: the STOP names the nonce of that HELLO's link
            peer = self.peers.get(action.worker_id)
            if stop == "model" and self.settings.model:
                # the job's model after the token: the worker says both
                stop = f"model {self.settings.model}"
            self.outbox.stop(peer, peer.hello_nonce, stop)
            return
        self.outbox.reject(action.worker_id, action.seq, action.reason, action.session)

    def on_held(self, action: Held) -> None:
        """A held worker is sent nothing: it waits for its release."""

    def on_left(self, action: WorkerLeft) -> None:
        log.info("worker %s left: %s", action.worker_id, action.reason)
        if action.reason == "refused":
            # its pushes kept failing: tell it why instead of letting it retry
            peer = self.peers.get(action.worker_id)
            if peer.session:
                self.outbox.stop(peer, peer.session, "refused")

    def stop_workers(self, reason: str) -> None:
        """STOP every worker that holds a session, each signed with its own key.

        At the job's end ("done") each first gets the final parameters, a
        release of its own (``Outbox.final``, bounded): the model it keeps.
        """
        peers = [self.peers.get(wid) for wid in self.server.stats()]
        peers = [peer for peer in peers if peer.session]
        if reason == "done":
            version, params = self.server.params_view()
            self.outbox.final(peers, version, params)
        for peer in peers:
            try:
                self.outbox.stop(peer, peer.session, reason)
            except Exception:  # a dead link must not keep the others running
                log.exception("could not stop %s", peer.worker_id)

    # ---- incoming messages
    def handle(self, topic: str, payload: bytes, now: float) -> None:
        """One raw message: validate and decode (bad input is dropped), handle, act."""
        if topic.startswith("$SYS/"):
            self.accounting.feed_sys(topic, payload)
            return
        if topic == self.model_topic:
            self.other_serves.feed(payload)
            if self.model_guard.heard(payload, now):
                self._restore_model(now)
            return
        item = self.ingest.feed(topic, payload, now)
        self.inbound.feed(item, now)
        if isinstance(item, Rejected):
            # ingest counted it as a drop too: charge it once, as a rejection
            self.accounting.resync(self.ingest.dropped)
            self.accounting.rejected_at_ingest(item.worker_id, item.reason)
        else:
            self.accounting.after_feed(topic, self.ingest.dropped)
        if item is None:
            return
        if isinstance(item, Rejected):
            carry_out([item], self)  # refused at ingest: the core never sees it
            return
        if self.gate is not None and self.gate.waiting:
            if isinstance(item, Join):
                self.gate.hold(item, self.ingest.hello_moments, now)
                self._admit(now)
                return
            if isinstance(item, Leave):
                self.gate.leave(item.worker_id, item.nonce)
        self._to_core(item, now)

    def _to_core(self, item: Any, now: float) -> None:
        actions = self.server.handle(item, now)
        if isinstance(item, Push):  # a refusal goes to the session that pushed
            actions = [_from(a, item.session) for a in actions]
        if isinstance(item, Join) and not any(isinstance(a, Rejected) for a in actions):
            # the core took the HELLO: its session is the worker's from now on
            peer = self.peers.get(item.worker_id)
            peer.open_session(item.session, item.nonce)
            self.outbox.welcome(peer, self.server.n_params)
            self.gc.joined(now)
        carry_out(actions, self)

    def _admit(self, now: float) -> None:
        """Once the gate fixes the scaler: into every WELCOME, then the HELLOs."""
        gate = self.gate
        joins = gate.admit(now) if gate is not None else None
        if gate is None or joins is None:
            return
        card = self.settings.card
        if card is not None:
            self.settings.card = replace(card, scaler=gate.fixed)
            self.outbox.welcome_fields.update(card_fields(self.settings.card))
        for join in joins:
            self._to_core(join, now)

    # ---- periodic work
    def tick(self, now: float) -> None:
        self.ingest.expire(now)
        self._admit(now)  # --scaler-from workers: the wait may be over
        if self.model_guard.due(now):
            self._restore_model(now)
        self.inbound.sample(self.link)
        self.accounting.resync(self.ingest.dropped)
        # a backlog in the inbox may hold heartbeats: silence counts up to
        # the arrival of the oldest message not yet handled
        oldest_age = getattr(getattr(self.link, "inbox", None), "oldest_age", None)
        age = float(oldest_age()) if oldest_age is not None else 0.0
        carry_out(self.server.handle(Tick(heard_until=now - age), now), self)
        for wid in self.server.take_forgotten():
            if self.server.worker_state(wid) is None:  # not back since
                self.peers.forget(wid)  # ids that never pushed: bounded memory
                self.accounting.forget(wid)
        self.gc.tick(now)

    def run_evaluation(self) -> float | None:
        if self.evaluate is None:
            return None
        _, params = self.server.params_snapshot()
        try:
            self.accuracy = float(self.evaluate(params))
        except Exception:
            log.exception("evaluation failed")
        verdict = self.watch.steer(
            self.server.model,
            params,
            accuracy=self.accuracy,
            non_finite_total=self.rejected["non_finite"],
            applied_total=self.applied,
        )
        if verdict.backed_off:
            log.warning("%s", self.watch.advice(self.server.model.lr))
        return self.accuracy

    def budget_spent(self) -> bool:
        """True once one more applied update could spend past --dp-epsilon-budget."""
        dp = self.server.model.dp
        return self.privacy is not None and dp is not None and self.privacy.spent(dp)

    def elapsed(self, now: float | None = None) -> float:
        return (self.clock() if now is None else now) - self._t0

    def record(self, now: float) -> dict[str, Any]:
        """One metrics snapshot (also what the progress display shows)."""
        t_prev, n_prev = self._last_rate
        if now - t_prev > 0:
            self._rate = (self.applied - n_prev) / (now - t_prev)
        self._last_rate = (now, self.applied)
        return reports.record(self, now, self._rate)

    def dropped(self) -> dict[str, int]:
        """Messages dropped by reason, including those the full inbox lost."""
        return reports.dropped(self.ingest, self.link)

    def unknown(self) -> dict[str, Any]:
        """Rejections and drops of senders the PS does not know, by reason."""
        return self.accounting.unknown(self.server.rejected_unregistered)

    def broker_report(self) -> dict[str, Any]:
        """The broker's $SYS drop/queue counters and serve's inbox overflow."""
        return reports.broker(self.accounting, self.link)

    def worker_rows(self, now: float) -> dict[str, dict[str, Any]]:
        """Per worker: clock, staleness, state, straggler class, accepted/rejected."""
        return reports.worker_rows(self.server, self.accounting, now)

    # ---- the loop
    def stop(self) -> None:
        """Ask the loop to finish (safe from a signal handler or another thread)."""
        self.stop_event.set()

    def run(self) -> Summary:
        """Serve until the target accuracy, the time limit, or `stop()`."""
        s = self.settings
        now = self.clock()
        self._t0 = now
        self._last_rate = (now, 0)
        self._relink.clear()
        self.gc.start()
        self.publish_model("running")
        next_tick = now + s.tick_interval
        next_eval = now + s.eval_interval
        next_metrics = now + s.metrics_interval
        next_ckpt = now + s.checkpoint_interval
        reason = "stopped"
        while True:
            if self.stop_event.is_set():
                reason = "interrupted"
                break
            item = self.link.get(min(0.05, s.tick_interval))
            # drain a burst (bounded, so periodic work still runs under load)
            burst = 0
            while item is not None:
                now = self.clock()
                self.handle(item[0], item[1], now)
                burst += 1
                item = self.link.get_nowait() if burst < 256 else None
                if self.budget_spent():  # --dp-epsilon-budget: not one update more
                    break
            if self.budget_spent():
                reason = "privacy_budget"
                break
            if self._relink.is_set():
                self._republish_model()
            now = self.clock()
            if now >= next_tick:
                self.tick(now)
                next_tick = now + s.tick_interval
            if now >= next_eval:
                self.run_evaluation()
                next_eval = now + s.eval_interval
                target = s.target_accuracy
                acc = self.accuracy
                if target is not None and acc is not None and acc >= target:
                    reason = "target_accuracy"
                    break
            if now >= next_metrics:
                self._emit(now)
                next_metrics = now + s.metrics_interval
            if now >= next_ckpt and self.on_checkpoint is not None:
                self._checkpoint()
                next_ckpt = now + s.checkpoint_interval
            if s.max_updates is not None and self.applied >= s.max_updates:
                reason = "max_updates"
                break
            if s.max_time is not None and self.elapsed(now) >= s.max_time:
                reason = "max_time"
                break
        return self.finish(reason)

    def _emit(self, now: float, force: bool = False) -> None:
        # a full disk or a closed terminal must not stop training
        try:
            record = self.record(now)
            if self.metrics is not None:
                self.metrics.write(record)
            if self.progress is not None:
                self.progress.show(record, now, force=force)
            if self.observer is not None:
                self.observer(record)
        except Exception:
            log.exception("could not write metrics/progress")

    def _checkpoint(self, *, final: bool = False) -> None:
        if self.on_checkpoint is None:
            return
        version = int(self.server.version)
        try:
            self.on_checkpoint(self)
        except Exception as exc:  # a full disk must not stop training
            self.checkpoints.failed(version, exc, final=final)
        else:
            self.checkpoints.saved(version, final=final)

    def finish(self, reason: str) -> Summary:
        """Final evaluation, MODEL 'done', last checkpoint and metrics; the summary."""
        now = self.clock()
        self.run_evaluation()
        self.publish_model("done")
        self.stop_workers("done")
        self._checkpoint(final=True)
        self._emit(now, force=True)
        return reports.summary(self, reason, now)


def _from(action: Any, session: int | None) -> Any:
    """A push's refusal, naming the session of the push it refuses."""
    if isinstance(action, Rejected) and action.session is None:
        return replace(action, session=session)
    return action
