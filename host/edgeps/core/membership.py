"""Who is in the job: joins, hellos again, heartbeats, leaves and liveness ticks.

``Membership`` is the half of ``ParameterServer`` that decides who counts:
a hello registers a worker (or keeps its place, or refuses another process
under its id), a heartbeat keeps it alive, a bye or a last will ends it, and
a tick times out the silent. With ``Admission.on_first_push`` a newcomer is
joining until its first push (``edgeps.core.admission``). The other half,
``edgeps.core.server``, applies pushes and runs the release passes; the
attributes and methods this half uses are declared below.
"""

from __future__ import annotations

import logging

from edgeps.core.admission import Admission, Registry
from edgeps.core.args import check_int, check_worker_id
from edgeps.core.balance import Balancer
from edgeps.core.policy_api import Policy
from edgeps.core.registry import WorkerRecord
from edgeps.core.release import WaitQueue
from edgeps.core.types import (
    Action,
    Heartbeat,
    Held,
    Join,
    Leave,
    Rejected,
    Release,
    WorkerLeft,
    WorkerState,
    WorkerStats,
)
from edgeps.core.view import ClusterView

log = logging.getLogger(__name__)


class Membership:
    """Membership events of the parameter server (a base of ``ParameterServer``)."""

    # set by ParameterServer.__init__
    policy: Policy
    view: ClusterView
    balancer: Balancer | None
    admission: Admission
    liveness_timeout: float
    resend_gap: float
    resends_refused: int
    _workers: Registry
    _queue: WaitQueue
    _carried_stats: dict[str, WorkerStats]

    # provided by ParameterServer
    def _release(self, worker_ids: list[str]) -> Release:
        raise NotImplementedError

    def _release_pass(self, now: float) -> list[str]:
        raise NotImplementedError

    def _release_action(self, now: float) -> list[Action]:
        raise NotImplementedError

    def _count_rejection(self, rec: WorkerRecord | None, wid: str, reason: str) -> None:
        raise NotImplementedError

    def _join(self, event: Join, now: float) -> list[Action]:
        """Register or rejoin a worker; it is released with the current version.

        Another process's hello for a live id that proved its session (a
        heartbeat or push in it) within the liveness timeout is refused
        (``duplicate_id``); a HELLO alone, which an earlier run's capture can
        replay, neither holds an id against another process nor keeps it alive."""
        worker_id = check_worker_id(event.worker_id)
        session = check_int("session", event.session)
        instance = session if event.instance is None else event.instance
        instance = check_int("instance", instance)
        rec = self._workers.get(worker_id)
        if rec is not None and rec.joining:
            return self._rejoin_joining(rec, event, instance, now)
        if rec is not None and rec.live and instance == rec.instance:
            # same process (a new link keeps its place, with a new session)
            same_link = session == rec.session
            rec.open_session(session, instance, event.nonce, event.max_batch)
            return self._rehello(rec, now, same_link)
        if rec is not None and rec.live:
            if now - rec.proven_at <= self.liveness_timeout:
                self._count_rejection(rec, worker_id, "duplicate_id")
                return [Rejected(worker_id, 0, "duplicate_id")]
            # restarted without a bye: its old life leaves the barrier first
            self._drop(rec, now)
        base = self._join_clock(worker_id)
        if rec is None:
            rec = self._workers.new(worker_id, session, instance)
            if rec is None:
                self._count_rejection(None, worker_id, "admission_full")
                return [Rejected(worker_id, 0, "admission_full")]
            rec.stats = self._carried_stats.pop(worker_id, rec.stats)
        rec.open_session(session, instance, event.nonce, event.max_batch)
        rec.last_push_clock = 0
        if self.admission.on_first_push:
            # released like anyone, but no barrier waits until it pushes
            rec.admit(False)
            rec.state, rec.clock, rec.answer, rec.waiting = (
                WorkerState.LIVE, base, None, False)  # fmt: skip
            rec.last_seen = rec.released_at = now
            rec.joins += 1
            self._workers.note_joining(worker_id)
            return [self._release([worker_id])]
        self._workers.note_live(worker_id)
        rec.admit(True)
        rec.state, rec.clock, rec.answer = WorkerState.LIVE, base, None
        rec.waiting = False
        self._queue.discard(rec)
        self.view.note_live(rec)
        rec.last_seen = rec.released_at = now
        rec.joins += 1
        if self.balancer is not None:
            self.balancer.joined(worker_id, max(0, int(event.max_batch)))
        self.policy.on_joined(self.view, worker_id, now)
        self.policy.on_released(self.view, worker_id, now)
        # its own release, never a shared copy: a HELLO asks for a whole one
        return [self._release([worker_id]), *self._release_action(now)]

    def _rejoin_joining(
        self, rec: WorkerRecord, event: Join, instance: int, now: float
    ) -> list[Action]:
        """A hello for an id that has not pushed yet: same process, or a takeover.

        Another process takes a joining id over unless the holder proved its
        session within the liveness timeout, as for a live one. A hello of the
        same process is answered again but does not extend the record's life:
        the joining id is still forgotten a liveness timeout after its first
        hello or its last heartbeat, so a replayed hello keeps nothing alive."""
        proven = now - rec.proven_at <= self.liveness_timeout
        if instance != rec.instance and proven:
            self._count_rejection(rec, rec.worker_id, "duplicate_id")
            return [Rejected(rec.worker_id, 0, "duplicate_id")]
        if instance != rec.instance:
            rec.last_seen = rec.released_at = now  # a new process: a new life
        rec.open_session(check_int("session", event.session), instance,
                         event.nonce, event.max_batch)  # fmt: skip
        return [self._release([rec.worker_id])]

    def take_forgotten(self) -> list[str]:
        """Ids forgotten since the last call (the runtime drops their peers)."""
        return self._workers.take_forgotten()

    @property
    def forgotten_total(self) -> int:
        """How many records were forgotten (joining ids expired, evictions)."""
        return self._workers.forgotten_total

    def _enter(self, rec: WorkerRecord, now: float) -> None:
        """A joining worker's first push: it enters the live set, level with the
        slowest live worker, and counts for the barrier from now on."""
        rec.clock = self.view.min_live_clock()
        rec.admit(True)
        self._workers.note_live(rec.worker_id)
        self.view.note_live(rec)
        if self.balancer is not None:
            self.balancer.joined(rec.worker_id, max(0, rec.max_batch))
        self.policy.on_joined(self.view, rec.worker_id, now)
        self.policy.on_released(self.view, rec.worker_id, now)

    def _rehello(
        self, rec: WorkerRecord, now: float, same_link: bool = False
    ) -> list[Action]:
        """Same process says hello again: held stays held, a lost release is resent.

        The resend is the worker's own release. On the same link it is sent
        when the worker was released since the last resend, or ``resend_gap``
        seconds after it: a replayed HELLO gets at most that many copies.
        """
        self._heard(rec, now)
        if rec.waiting:
            return [Held(rec.worker_id, rec.clock), *self._release_action(now)]
        if (
            same_link
            and rec.resent_at >= rec.released_at
            and now - rec.resent_at < self.resend_gap
        ):
            self.resends_refused += 1
            return self._release_action(now)
        rec.released_at = rec.resent_at = now
        self.policy.on_released(self.view, rec.worker_id, now)
        return [self._release([rec.worker_id]), *self._release_action(now)]

    def _join_clock(self, worker_id: str) -> int:
        """A (re)joining worker starts level with the slowest live worker.

        It is not live itself at this point (new, or its old life dropped)."""
        return self.view.min_live_clock()

    def _heartbeat(self, event: Heartbeat, now: float) -> list[Action]:
        """Note that a worker is alive; dead or unknown workers must join again."""
        rec = self._workers.get(event.worker_id)
        if rec is None or not (rec.live or rec.joining):
            return []
        if event.session is not None and event.session != rec.session:
            self._count_rejection(rec, rec.worker_id, "stale_session")
            return []
        self._heard(rec, now)
        rec.proven_at = now
        return self._release_action(now) if rec.live else []

    def _leave(self, event: Leave, now: float) -> list[Action]:
        """A worker is gone (bye, last will of its current link): it leaves at once."""
        worker_id, reason = event.worker_id, event.reason
        rec = self._workers.get(worker_id)
        if rec is None or not (rec.live or rec.joining):
            return []
        if event.nonce is not None and event.nonce != rec.nonce:
            self._count_rejection(rec, worker_id, "stale_session")
            return []
        if rec.joining:
            rec.state = WorkerState.DEAD  # it held nothing: no barrier to leave
            self._workers.note_dead(worker_id)
            return [WorkerLeft(worker_id, str(reason))]
        self._drop(rec, now)
        return [WorkerLeft(worker_id, str(reason)), *self._release_action(now)]

    def _tick(self, now: float, heard_until: float) -> list[Action]:
        """Declare silent computing workers suspected, then dead; release whom it frees.

        A worker held at the barrier is never timed out: it is silent because
        the PS told it to wait, and it blocks nobody. Its silence is counted
        again from the moment it is released, and only up to ``heard_until``
        (messages that arrived later are still waiting to be handled). A
        joining id silent that long is forgotten.
        """
        actions: list[Action] = []
        for rec in list(self._workers.values()):
            if rec.joining:
                silent = heard_until - max(rec.last_seen, rec.released_at)
                if silent > self.liveness_timeout:
                    self._workers.forget(rec.worker_id)
                continue
            if not rec.live or rec.waiting:
                continue
            silent = heard_until - max(rec.last_seen, rec.released_at)
            if silent > self.liveness_timeout:
                self._drop(rec, now)
                actions.append(WorkerLeft(rec.worker_id, "timeout"))
            elif silent > self.liveness_timeout / 2:
                rec.state = WorkerState.SUSPECTED
        actions.extend(self._release_action(now))
        return actions

    def _heard(self, rec: WorkerRecord, now: float) -> None:
        rec.last_seen = max(rec.last_seen, now)
        if rec.state is WorkerState.SUSPECTED:
            rec.state = WorkerState.LIVE

    def _drop(self, rec: WorkerRecord, now: float) -> None:
        if self.view.n_live == 1:
            self.view.floor = rec.clock  # rejoiners continue from here
        rec.state = WorkerState.DEAD
        rec.waiting = False
        self._queue.discard(rec)
        self._workers.note_dead(rec.worker_id)
        self.view.note_dead(rec)
        if self.balancer is not None:
            self.balancer.left(rec.worker_id)
        self.policy.on_left(self.view, rec.worker_id, now)
