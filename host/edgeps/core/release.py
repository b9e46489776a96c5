"""The workers held at the barrier, and the release pass that asks the policy.

A policy with a keyed release rule (``Policy.keyed_release``) says "a waiting
worker may proceed iff its key <= the limit": the key is fixed while the
worker waits, the limit moves (BSP's is the smallest live clock, DSP's the
progress floor plus w). The waiting workers then sit in a heap by key, and a
release pass pops those at or below the limit: it costs O(log N) plus the
workers it releases, instead of one ``may_proceed`` per waiting worker. Every
popped worker is still confirmed with ``may_proceed``, so a policy's own rule
has the last word and its side effects happen exactly as in a full scan.
Policies without a key get the full scan, in registry order.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Mapping

from edgeps.core.policy_api import Policy
from edgeps.core.registry import WorkerRecord
from edgeps.core.view import ClusterView

log = logging.getLogger(__name__)


class WaitQueue:
    """Live workers held at the barrier: a set, and a heap by release key."""

    def __init__(self) -> None:
        self._held: dict[str, WorkerRecord] = {}
        self._heap: list[tuple[float, int, int, str]] = []  # stale entries left
        self._tokens = 0

    def __len__(self) -> int:
        return len(self._held)

    def hold(self, rec: WorkerRecord, key: float | None) -> None:
        """``rec`` waits; ``key`` is its release key (None: the policy has none)."""
        self._held[rec.worker_id] = rec
        self._tokens += 1
        rec.wait_token = self._tokens
        if key is not None:
            heapq.heappush(self._heap, (key, rec.order, self._tokens, rec.worker_id))
            if len(self._heap) > 2 * len(self._held) + 64:
                self._heap = [e for e in self._heap if self._valid(e)]
                heapq.heapify(self._heap)

    def discard(self, rec: WorkerRecord) -> None:
        self._held.pop(rec.worker_id, None)

    def _valid(self, entry: tuple[float, int, int, str]) -> bool:
        rec = self._held.get(entry[3])
        return rec is not None and rec.wait_token == entry[2]

    def pop_upto(self, limit: float) -> list[tuple[float, WorkerRecord]]:
        """Remove and return (key, record) of the held with key <= limit, by order."""
        heap, out = self._heap, []
        while heap and heap[0][0] <= limit:
            entry = heapq.heappop(heap)
            if self._valid(entry):
                out.append((entry[0], self._held[entry[3]]))
        out.sort(key=lambda kr: kr[1].order)
        return out

    def put_back(self, key: float, rec: WorkerRecord) -> None:
        heapq.heappush(self._heap, (key, rec.order, rec.wait_token, rec.worker_id))

    def held(self) -> list[WorkerRecord]:
        """Every held worker, in registry order."""
        return sorted(self._held.values(), key=lambda r: r.order)


def release_pass(
    policy: Policy,
    view: ClusterView,
    queue: WaitQueue,
    workers: Mapping[str, WorkerRecord],
    now: float,
    mark_released: Callable[[str], None],
    *,
    keyed: bool = True,
) -> tuple[list[str], bool]:
    """Ask the policy about the waiting workers; (the released ids, forced?).

    ``keyed=False`` asks ``may_proceed`` for every waiting worker, in registry
    order (the rule a keyed pass must agree with).
    """
    policy.refresh(view, now)
    if not len(queue):
        return [], False
    view.floor = view.min_live_clock()
    if keyed and policy.keyed_release:
        limit = policy.release_limit(view, now)
        released = []
        n_held = len(queue)
        for key, rec in queue.pop_upto(limit):
            if policy.may_proceed(view, rec.worker_id, now):
                released.append(rec.worker_id)
            else:  # the key broke its promise; the rule itself decides
                log.warning("policy %s: key %s <= %s but held", policy, key, limit)
                queue.put_back(key, rec)
    else:
        waiting = [r for r in workers.values() if r.waiting and r.live]
        released = [
            r.worker_id for r in waiting if policy.may_proceed(view, r.worker_id, now)
        ]
        n_held = len(waiting)
    for w in released:
        mark_released(w)
    if released or n_held != view.n_live:
        return released, False
    # never deadlock, whatever the policy says: the slowest go on
    waiting = queue.held()
    low = min(r.clock for r in waiting)
    for r in waiting:
        if r.clock == low:
            mark_released(r.worker_id)
            released.append(r.worker_id)
    log.warning("policy %s held every live worker; released the slowest", policy)
    return released, True
