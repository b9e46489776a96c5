"""The parameter server core: one flat parameter vector, a worker registry, a policy.

Pure logic with time passed in, so the MQTT host runs it in real time and the
simulator in virtual time. ``handle(event, now)`` is the one entry point: it
takes any event of ``edgeps.core.types`` and returns the actions for the caller
to carry out (send parameters, count a rejection, ...). The core imports no
policy, runtime or transport module (see ``edgeps.core.policy_api``).
Membership events (hellos, heartbeats, leaves, ticks) are handled by its base
``edgeps.core.membership.Membership``; the records and their bounds are an
``edgeps.core.admission.Registry``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from edgeps import kernels
from edgeps.core.admission import Admission, Registry
from edgeps.core.args import (
    check_now,
    check_positive,
)
from edgeps.core.balance import Balancer
from edgeps.core.defaults import JOB
from edgeps.core.membership import Membership
from edgeps.core.model_step import ModelStep
from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.norm_guard import NormGuard
from edgeps.core.policy_api import Policy
from edgeps.core.privacy import DPMechanism
from edgeps.core.registry import WorkerRecord
from edgeps.core.release import WaitQueue, release_pass
from edgeps.core.resume import checked_checkpoint
from edgeps.core.snapshot import server_snapshot
from edgeps.core.types import (
    Action,
    Applied,
    Event,
    Heartbeat,
    Held,
    Join,
    Leave,
    Push,
    Rejected,
    Release,
    Tick,
    WorkerLeft,
    WorkerState,
    WorkerStats,
)
from edgeps.core.validate import (
    content_problem,
    identity_problem,
    update_digest,
)
from edgeps.core.view import ClusterView

log = logging.getLogger(__name__)
# a worker refused this many turns in a row (non-finite, malformed) leaves the job
MAX_REFUSED_IN_ROW = 8
# a HELLO on the same link brings a resend at most this often (seconds) unless
# the worker was released since the last one: a replayed HELLO cannot flood
RESEND_GAP = 1.0


class ParameterServer(Membership):
    """Applies pushes exactly once, tracks liveness and asks the policy whom to release.

    Parameters
    ----------
    params : initial flat float32 parameter vector (copied).
    policy : the sync ``Policy`` (``edgeps.policy.parse_policy`` reads text forms).
    optimizer : "sgd" | "momentum" | "adam", or an ``edgeps.kernels`` Optimizer.
    lr : step size; with ``staleness_aware`` each push uses lr / (staleness + 1).
    lr_workers : past this many live workers each push steps by lr x lr_workers /
        live (``edgeps.core.defaults.worker_step_scale``); 0: the plain lr.
    liveness_timeout : seconds a computing worker may stay silent before it is
        declared dead and leaves the barrier (suspected after half of it).
    max_update_norm : updates whose L2 norm exceeds this are clipped to it.
    norm_guard : also clip updates outsized against the recent applied norms
        (``edgeps.core.norm_guard``); None: no such bound.
    monitor : the ``PerformanceMonitor`` to feed (a default one if None).
    balancer : assigns each released worker its batch and weights each push by
        its samples (lr x samples / base batch); None: every push weighs the same.
    server_opt, server_lr : the optimizer and step a delta (``Push.steps`` > 1)
        and every aggregate is applied with (``edgeps.core.defaults``); the
        balancer does not weigh a delta, which already holds its samples.
    dp : differential privacy of every applied update (``edgeps.core.privacy``);
        None: off.

    admission : when a newcomer starts to hold the barrier and how many ids
        are kept (``edgeps.core.admission``); None: ``Admission()``.

    The parameters and the step rules live in ``self.model``
    (``edgeps.core.model_step.ModelStep``); this class decides whose update is
    applied, when, and whom it releases.
    """

    def __init__(
        self,
        params: np.ndarray,
        *,
        policy: Policy,
        optimizer: str | kernels.Optimizer = "sgd",
        lr: float = JOB.lr,
        lr_workers: int = JOB.lr_workers,
        staleness_aware: bool = False,
        liveness_timeout: float = 10.0,
        max_update_norm: float | None = None,
        norm_guard: NormGuard | None = None,
        monitor: PerformanceMonitor | None = None,
        balancer: Balancer | None = None,
        server_opt: str | kernels.Optimizer = JOB.server_opt,
        server_lr: float = JOB.server_lr,
        admission: Admission | None = None,
        dp: DPMechanism | None = None,
    ) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a Policy, got {type(policy)!r}")
        self.model = ModelStep(
            params,
            optimizer=optimizer,
            lr=lr,
            lr_workers=lr_workers,
            staleness_aware=staleness_aware,
            max_update_norm=max_update_norm,
            norm_guard=norm_guard,
            server_opt=server_opt,
            server_lr=server_lr,
            dp=dp,
        )
        self.policy = policy
        self.liveness_timeout = check_positive("liveness_timeout", liveness_timeout)
        self.monitor = monitor if monitor is not None else PerformanceMonitor()
        if not isinstance(balancer, (Balancer, type(None))):
            raise TypeError(f"balancer must be a Balancer, got {type(balancer)!r}")
        self.balancer = balancer
        self.max_staleness_seen = 0
        self.forced_releases = 0  # safety net firings: a policy left everyone waiting
        self.resend_gap = RESEND_GAP
        self.resends_refused = 0  # same-link HELLOs answered by no second copy
        self.rejected_unregistered: dict[str, int] = {}
        self.admission = admission if admission is not None else Admission()
        self._workers = Registry(self.admission)
        self._carried_stats: dict[str, WorkerStats] = {}  # from a checkpoint
        self.view = ClusterView(self._workers, self.monitor, lambda: self.version)
        self._queue = WaitQueue()  # live workers held at the barrier
        self.keyed_release = True  # False: ask the policy about every waiting one

    # ---- parameters -------------------------------------------------------

    @property
    def version(self) -> int:
        """The parameters' version: how many updates have been applied."""
        return self.model.version

    @property
    def n_params(self) -> int:
        return self.model.n_params

    def params_snapshot(self) -> tuple[int, np.ndarray]:
        """(version, a copy of the parameters)."""
        return self.model.snapshot()

    def params_view(self) -> tuple[int, np.ndarray]:
        """(version, the parameters as a read-only array: one copy per version)."""
        return self.model.view()

    def restore(
        self,
        *,
        version: int,
        optimizer_state: dict[str, Any] | None = None,
        params: np.ndarray | None = None,
        worker_stats: dict[str, WorkerStats] | None = None,
    ) -> None:
        """Resume a checkpoint before any join (checked by ``edgeps.core.resume``)."""
        joined = any(r.live for r in self._workers.values())
        ckpt = checked_checkpoint(
            version,
            params,
            worker_stats,
            self.model.like_params(),
            joined,
            optimizer_state,
        )
        self.model.restore(ckpt.version, ckpt.params, optimizer_state)
        self._carried_stats.update(ckpt.worker_stats)
        self.max_staleness_seen = max(self.max_staleness_seen, ckpt.max_staleness)

    # ---- the entry point --------------------------------------------------

    def handle(self, event: Event, now: float) -> list[Action]:
        """Handle one event at time ``now`` (seconds); the actions to carry out."""
        now = check_now(now)
        if isinstance(event, Push):
            return self._push(event, now)
        if isinstance(event, Join):
            return self._join(event, now)
        if isinstance(event, Heartbeat):
            return self._heartbeat(event, now)
        if isinstance(event, Leave):
            return self._leave(event, now)
        if isinstance(event, Tick):
            until = event.heard_until
            return self._tick(now, now if until is None else min(now, check_now(until)))
        raise TypeError(f"not a core event: {type(event).__name__}")

    # ---- pushes -----------------------------------------------------------

    def _push(self, push: Push, now: float) -> list[Action]:
        """Validate, apply exactly once, then let the policy hold or release."""
        rec = self._workers.get(push.worker_id)
        seq = int(push.seq)
        problem = identity_problem(rec, push)
        if problem is not None:
            self._count_rejection(rec, push.worker_id, problem)
            return [Rejected(push.worker_id, seq, problem)]
        assert rec is not None
        self._heard(rec, now)
        rec.proven_at = now
        if rec.joining:
            self._enter(rec, now)
        if rec.waiting:
            # it was not released, so this push breaks the worker protocol
            rec.refused = (seq, update_digest(push))
            self._count_rejection(rec, rec.worker_id, "not_released")
            return [Rejected(rec.worker_id, seq, "not_released")]
        problem = content_problem(rec, push, self.version, self.n_params)
        if problem is None:
            # only a usable push moves the clock: a forged one cannot poison it
            rec.last_push_clock = int(push.clock)
        # the policy's own rule (a round's late push) goes first: such a push
        # would not have counted for the barrier even if it were usable
        late = self.policy.admit(self.view, push, now)
        if late is not None:
            # remembered, not recorded: a refused push never blocks later ones
            rec.refused = (seq, update_digest(push))
            return self._reject_and_resync(rec, seq, problem or late, now)
        if problem is not None:
            # unusable, but the worker's turn: it answers the barrier
            rec.refused = (seq, update_digest(push))
            self._count_rejection(rec, rec.worker_id, problem)
            return self._take_turn(rec, push, now, refused=problem)
        return self._take_turn(rec, push, now)

    def _step(self, rec: WorkerRecord, push: Push, staleness: int) -> None:
        """Apply the push's update, clipped to the norm bound, as one version.

        A delta (``steps`` > 1), or any push under an aggregating policy, goes
        through the server optimizer, or is collected by the policy
        (``_apply_aggregate`` applies what it releases).
        """
        model, n_live = self.model, self.view.n_live
        weight = self.policy.step_scale(self.view, push, staleness)
        if not self.policy.aggregates and int(push.steps) <= 1:
            if self.balancer is not None:
                weight *= self.balancer.weight(push.samples, rec.worker_id)
            rec.clipped += model.step_gradient(push, staleness, n_live, weight)
            return
        delta, clipped = model.delta_of(push)
        rec.clipped += clipped
        if self.policy.aggregates:
            self.policy.collect(self.view, push, delta, staleness)
        else:
            model.step_delta(delta, staleness, n_live, weight)

    def _apply_aggregate(self, now: float) -> None:
        """Apply the aggregate the policy releases now, if any, as one version."""
        pseudo = self.policy.aggregate(self.view, now)
        if pseudo is not None:
            self.model.step_aggregate(pseudo)

    def _take_turn(
        self, rec: WorkerRecord, push: Push, now: float, refused: str | None = None
    ) -> list[Action]:
        """The worker's push counts for the barrier: applied, or refused as unusable.

        A worker refused ``MAX_REFUSED_IN_ROW`` turns in a row leaves the job.
        """
        staleness = self.version - int(push.base_version)
        if refused is None:
            self._step(rec, push, staleness)
            rec.refused_in_row = 0
        else:
            rec.refused_in_row += 1
            if rec.refused_in_row >= MAX_REFUSED_IN_ROW:
                self._drop(rec, now)
                return [
                    Rejected(rec.worker_id, int(push.seq), refused),
                    WorkerLeft(rec.worker_id, "refused"),
                    *self._release_action(now),
                ]
        compute = float(push.compute_time)
        # iteration = release -> push (compute + both link legs): the worker's
        # own pace, without the time the policy kept it waiting at the barrier
        since_release = max(0.0, now - rec.released_at)
        self.monitor.observe(
            rec.worker_id,
            compute_time=compute,
            comm_time=max(0.0, since_release - compute),
            iteration_time=since_release,
            now=now,
        )
        if self.balancer is not None:
            self.balancer.observe(rec.worker_id, push.samples, compute, since_release)
        rec.clock += 1
        self.view.note_clock(rec, rec.clock - 1)
        rec.answer = int(push.seq)
        rec.waiting = True
        if refused is None:
            rec.last_seq = int(push.seq)
            rec.stats.accepted += 1
            rec.stats.max_staleness = max(rec.stats.max_staleness, staleness)
            rec.last_staleness = staleness
            self.max_staleness_seen = max(self.max_staleness_seen, staleness)
        self.policy.on_applied(self.view, push, now)
        keyed = self.policy.keyed_release
        key = self.policy.release_key(self.view, rec.worker_id) if keyed else None
        self._queue.hold(rec, key)
        actions: list[Action] = [
            Applied(rec.worker_id, int(push.seq), self.version, staleness)
            if refused is None
            else Rejected(rec.worker_id, int(push.seq), refused)
        ]
        released = self._release_pass(now)
        if rec.worker_id not in released:
            actions.append(Held(rec.worker_id, rec.clock))
        if released:
            actions.append(self._release(released))
        return actions

    def _reject_and_resync(
        self, rec: WorkerRecord, seq: int, reason: str, now: float
    ) -> list[Action]:
        """Drop the push but send the worker current parameters so it does not hang."""
        self._count_rejection(rec, rec.worker_id, reason)
        rec.answer = seq
        rec.released_at = now
        self.policy.on_released(self.view, rec.worker_id, now)
        others = self._release_pass(now)
        return [
            Rejected(rec.worker_id, seq, reason),
            self._release([rec.worker_id, *others]),
        ]

    def _count_rejection(self, rec: WorkerRecord | None, wid: str, reason: str) -> None:
        if rec is None:
            unregistered = self.rejected_unregistered
            unregistered[reason] = unregistered.get(reason, 0) + 1
        else:
            rec.count_rejection(reason)
        log.debug("rejected push from %r: %s", wid, reason)

    # ---- releases ---------------------------------------------------------

    def _release(self, worker_ids: list[str]) -> Release:
        """One release of the current version, answering each worker's last push."""
        version, params = self.params_view()
        answers = tuple(self._workers[w].answer for w in worker_ids)
        batches = None if self.balancer is None else self.balancer.batches(worker_ids)
        if batches is not None:
            for w in worker_ids:  # a joining worker is not the balancer's yet
                rec = self._workers[w]
                if rec.joining and rec.max_batch > 0:
                    batches[w] = min(batches[w], rec.max_batch)
        return Release(tuple(worker_ids), version, params, answers, batches)

    def _release_action(self, now: float) -> list[Action]:
        released = self._release_pass(now)
        return [self._release(released)] if released else []

    def _release_pass(self, now: float) -> list[str]:
        """Release the waiting workers that may go on (``edgeps.core.release``)."""
        if self.policy.aggregates:
            self._apply_aggregate(now)
        released, forced = release_pass(
            self.policy,
            self.view,
            self._queue,
            self._workers,
            now,
            lambda w: self._mark_released(w, now),
            keyed=self.keyed_release,
        )
        self.forced_releases += forced
        return released

    def _mark_released(self, worker_id: str, now: float) -> None:
        rec = self._workers[worker_id]
        rec.waiting = False
        self._queue.discard(rec)
        rec.released_at = now
        self.policy.on_released(self.view, worker_id, now)

    # ---- reporting --------------------------------------------------------

    def stats(self) -> dict[str, WorkerStats]:
        """Per-worker counters (copies)."""
        return {
            w: dataclasses.replace(r.stats, rejected=dict(r.stats.rejected))
            for w, r in self._workers.items()
        }

    def worker_state(self, worker_id: str) -> WorkerState | None:
        rec = self._workers.get(worker_id)
        return None if rec is None else rec.state

    def snapshot(self, now: float, *, monitor: bool = True) -> dict[str, Any]:
        """Json-able state for metrics: version, workers, policy, monitor
        (``monitor=False``: without the monitor's per-worker times)."""
        return server_snapshot(self, self._workers, check_now(now), monitor=monitor)
