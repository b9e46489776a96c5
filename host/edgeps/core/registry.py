"""Worker registry of the PS: identity, liveness, clock and exactly-once state.

Per-worker state on the host lives in two records, one on each side of the
core: ``WorkerRecord`` here (what the PS decides with) and
``edgeps.runtime.peers.Peer`` (how the runtime reaches the worker: topics,
chunk size, model check). Two kinds of per-worker state stay outside on
purpose: the ``PerformanceMonitor``'s timing series (fed by the core, read by
policies and metrics, and kept across a worker's lives so a rejoining board
is not re-measured from scratch) and each policy's own derived quantities
(DSP's normalised progress, K-of-N's round assignment, DSSP's credit), which
only that policy can interpret; each policy's docstring says what it keeps.
"""

from __future__ import annotations

from edgeps.core.types import WorkerState, WorkerStats

_LIVE_STATES = (WorkerState.LIVE, WorkerState.SUSPECTED)


class WorkerRecord:
    """What the PS knows about one worker; mutated only by the server.

    ``clock`` is the PS's count of this worker's applied pushes, offset at
    (re)join so that a newcomer starts level with the slowest live worker
    instead of dragging the barrier back to zero. ``session`` is the current
    one (issued at join), ``instance`` the worker process that holds it and
    ``nonce`` the link of its hello. ``last_seq`` is the highest sequence
    number applied in ``session`` (-1: none); ``refused`` names the last push
    refused after its identity checked out, by seq and a digest of its
    update, so its redelivery is a duplicate while another push with that seq
    (the worker's own, after a forged one) is still heard.
    ``answer`` is the seq of the push its next release answers (None after a
    join: it answers no push).
    ``admitted`` is False while the worker is joining (``edgeps.core.admission``:
    it said hello and has not pushed yet, so it is in no barrier).
    ``live`` (live or suspected, and admitted: counted by the barrier) is a
    plain flag because release passes read it for every worker.
    """

    __slots__ = (
        "worker_id",
        "order",
        "wait_token",
        "session",
        "instance",
        "nonce",
        "max_batch",
        "refused",
        "refused_in_row",
        "clipped",
        "_state",
        "admitted",
        "live",
        "clock",
        "last_seq",
        "answer",
        "last_push_clock",
        "waiting",
        "last_seen",
        "proven_at",
        "released_at",
        "resent_at",
        "last_staleness",
        "joins",
        "stats",
    )

    def __init__(
        self, worker_id: str, session: int, instance: int = 0, order: int = 0
    ) -> None:
        self.worker_id = worker_id
        self.order = order  # position in the registry: release passes go in it
        self.wait_token = 0  # which hold of the wait queue is current
        self.session = session
        self.instance = instance
        self.nonce = 0
        self.max_batch = 0
        self.refused: tuple[int, int] = (-1, 0)
        self.refused_in_row = 0  # turns refused since the last applied push
        self.clipped = 0  # pushes applied scaled down to the norm bound
        self._state = WorkerState.LIVE
        self.admitted = True
        self.live = True
        self.clock = 0
        self.last_seq = -1
        self.answer: int | None = None
        self.last_push_clock = 0  # the worker's own clock of its last handled push
        self.waiting = False
        self.last_seen = 0.0
        # a message bound to the current session (heartbeat, push) was heard:
        # a HELLO proves nothing, since one from an earlier run can be replayed
        self.proven_at = float("-inf")
        self.released_at = 0.0
        self.resent_at = float("-inf")  # the last release a HELLO asked for
        self.last_staleness = 0
        self.joins = 0
        self.stats = WorkerStats()

    @property
    def state(self) -> WorkerState:
        return self._state

    @state.setter
    def state(self, value: WorkerState) -> None:
        self._state = value
        self.live = self.admitted and value in _LIVE_STATES

    @property
    def joining(self) -> bool:
        """Alive but not admitted: it said hello and has not pushed yet."""
        return not self.admitted and self._state in _LIVE_STATES

    def admit(self, admitted: bool) -> None:
        """Enter (True) or leave (False) the barrier, keeping the liveness state."""
        self.admitted = admitted
        self.state = self._state

    def open_session(
        self, session: int, instance: int, nonce: int, max_batch: int
    ) -> None:
        """Take the session a hello opens; sequence numbers restart with a new one."""
        if session != self.session:
            self.last_seq, self.refused = -1, (-1, 0)
            self.proven_at = float("-inf")
        self.session, self.instance = session, instance
        self.nonce, self.max_batch = int(nonce), int(max_batch)

    def count_rejection(self, reason: str) -> None:
        self.stats.rejected[reason] = self.stats.rejected.get(reason, 0) + 1

    def __repr__(self) -> str:
        return (
            f"WorkerRecord({self.worker_id!r}, session={self.session:x}, "
            f"{self._state.value}, clock={self.clock}, waiting={self.waiting})"
        )
