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
    check_params,
    check_positive,
    resolve_optimizer,
)
from edgeps.core.balance import Balancer
from edgeps.core.defaults import JOB, worker_step_scale
from edgeps.core.membership import Membership
from edgeps.core.monitor import PerformanceMonitor
from edgeps.core.norm_guard import NormGuard
from edgeps.core.policy_api import Policy
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
    clip_scale,
    content_problem,
    identity_problem,
    update_digest,
)
from edgeps.core.view import ClusterView

log = logging.getLogger(__name__)
# a worker refused this many turns in a row (non-finite, malformed) leaves the job
MAX_REFUSED_IN_ROW = 8


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
    max_update_norm : pushes whose L2 norm exceeds this are dropped ("norm").
    norm_guard : also drop ("norm") pushes outsized against the recent applied
        norms (``edgeps.core.norm_guard``); None: no such check.
    monitor : the ``PerformanceMonitor`` to feed (a default one if None).
    balancer : assigns each released worker its batch and weights each push by
        its samples (lr x samples / base batch); None: every push weighs the same.
    admission : when a newcomer starts to hold the barrier and how many ids
        are kept (``edgeps.core.admission``); None: ``Admission()``.
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
        admission: Admission | None = None,
    ) -> None:
        check_params(params)
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a Policy, got {type(policy)!r}")
        lr = check_positive("lr", lr)
        liveness_timeout = check_positive("liveness_timeout", liveness_timeout)
        if max_update_norm is not None:
            max_update_norm = check_positive("max_update_norm", max_update_norm)
        self._params = np.array(params, dtype=np.float32, copy=True, order="C")
        self.optimizer = resolve_optimizer(optimizer, self._params.size)
        self.policy = policy
        self.lr = float(lr)
        if isinstance(lr_workers, bool) or not isinstance(lr_workers, int):
            raise TypeError(f"lr_workers must be an int, got {lr_workers!r}")
        if lr_workers < 0:
            raise ValueError(f"lr_workers must be >= 0, got {lr_workers}")
        self.lr_workers = lr_workers
        # cut by the runtime's DivergenceWatch when the job diverges
        self.step_backoff = 1.0
        self.staleness_aware = bool(staleness_aware)
        self.liveness_timeout = float(liveness_timeout)
        self.max_update_norm = (
            None if max_update_norm is None else float(max_update_norm)
        )
        self.norm_guard = norm_guard
        if norm_guard is not None and norm_guard.prior is None:
            norm_guard.prior = max(1.0, kernels.l2_norm(self._params))
        self.monitor = monitor if monitor is not None else PerformanceMonitor()
        if not isinstance(balancer, (Balancer, type(None))):
            raise TypeError(f"balancer must be a Balancer, got {type(balancer)!r}")
        self.balancer = balancer
        self.admission = admission if admission is not None else Admission()
        self.version = 0
        self.max_staleness_seen = 0
        self.clipped = 0  # pushes applied scaled down to the norm bound
        self.forced_releases = 0  # safety net firings: a policy left everyone waiting
        self.rejected_unregistered: dict[str, int] = {}
        self._workers = Registry(self.admission)
        self._carried_stats: dict[str, WorkerStats] = {}  # from a checkpoint
        self.view = ClusterView(self._workers, self.monitor, lambda: self.version)
        self._queue = WaitQueue()  # live workers held at the barrier
        self.keyed_release = True  # False: ask the policy about every waiting one
        self._shared: tuple[int, np.ndarray] | None = None  # see params_view()

    # ---- parameters -------------------------------------------------------

    @property
    def n_params(self) -> int:
        return int(self._params.size)

    def params_snapshot(self) -> tuple[int, np.ndarray]:
        """(version, a copy of the parameters)."""
        return self.version, self._params.copy()

    def params_view(self) -> tuple[int, np.ndarray]:
        """(version, the parameters as a read-only array: one copy per version)."""
        shared = self._shared
        if shared is None or shared[0] != self.version:
            frozen = self._params.copy()
            frozen.flags.writeable = False
            shared = self._shared = (self.version, frozen)
        return shared

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
        ckpt = checked_checkpoint(version, params, worker_stats, self._params, joined)
        if optimizer_state:
            self.optimizer.load_state_dict(optimizer_state)
        if ckpt.params is not None:
            self._params[...] = ckpt.params
        self.version, self._shared = ckpt.version, None
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
        if rec.joining:
            self._enter(rec, now)
        if rec.waiting:
            # it was not released, so this push breaks the worker protocol
            rec.refused = (seq, update_digest(push))
            self._count_rejection(rec, rec.worker_id, "not_released")
            return [Rejected(rec.worker_id, seq, "not_released")]
        problem = content_problem(rec, push, self.version, self.n_params)
        if problem is not None:
            # unusable, but the worker's turn: it answers the barrier
            rec.refused = (seq, update_digest(push))
            self._count_rejection(rec, rec.worker_id, problem)
            return self._take_turn(rec, push, now, refused=problem)
        # only a usable push moves the clock: a forged one cannot poison it
        rec.last_push_clock = int(push.clock)
        problem = self.policy.admit(self.view, push, now)
        if problem is not None:
            # remembered, not recorded: a refused push never blocks later ones
            rec.refused = (seq, update_digest(push))
            return self._reject_and_resync(rec, seq, problem, now)
        return self._take_turn(rec, push, now)

    def _step(self, rec: WorkerRecord, push: Push, staleness: int) -> None:
        """Apply the push's update, clipped to the norm bound, as one version."""
        scale = clip_scale(push.update, self.max_update_norm, self.norm_guard)
        if scale < 1.0:
            rec.clipped += 1
            self.clipped += 1
        lr = self.lr / (staleness + 1) if self.staleness_aware else self.lr
        lr *= self.step_backoff * worker_step_scale(self.lr_workers, self.view.n_live)
        lr *= self.policy.step_scale(self.view, push, staleness)
        if self.balancer is not None:
            lr *= self.balancer.weight(push.samples, rec.worker_id)
        self.optimizer.step(self._params, push.update, lr * scale)
        self.version += 1
        if self.norm_guard is not None:
            self.norm_guard.accept(kernels.l2_norm(push.update) * scale)

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
