"""Who each refused or dropped message is charged to, and what the broker dropped.

The core counts the rejections of registered workers in their stats. This
module adds what it cannot see, so that every refusal has a name:

- rejections at ingest (a HELLO for another model) per worker id;
- wire-level drops (malformed, bad HMAC, oversized, ...) per worker: the id
  in the up topic when the topic is valid and names a worker the PS knows,
  else ``unknown`` (ids that never joined are not kept one by one: a flood of
  made-up ids must not grow memory);
- the broker's own counters from ``$SYS`` (mosquitto publishes them every
  ``sys_interval``, 10 s by default): publishes it dropped at its queue or
  inflight limits and messages it holds. They are broker-wide: mosquitto does
  not say for whom it dropped. mosquitto 2.0 grants a SUBSCRIBE that its ACL
  forbids and then sends nothing, so serve also reads the retained
  ``$SYS/broker/version``: hearing nothing at all on ``$SYS`` means that an
  ACL keeps it from serve (or that the broker publishes no ``$SYS``), and the
  summary says so (``sys``: ``unreadable``; ``refused`` when the SUBACK says
  it).

Partial updates that expire or are evicted in reassembly and the host's own
inbox overflow stay job-wide (``dropped``): the reassembler and the inbox
count them without a sender.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from edgeps_worker import wire_host as wire

log = logging.getLogger(__name__)

UNKNOWN = "unknown"

# the $SYS topics serve subscribes to -> the names in the summary
SYS_COUNTERS = {
    "$SYS/broker/publish/messages/dropped": "publish_dropped",
    "$SYS/broker/store/messages/count": "store_messages",
    "$SYS/broker/store/messages/bytes": "store_bytes",
}
SYS_VERSION = "$SYS/broker/version"  # retained: heard at once when $SYS is readable


def sys_subscriptions() -> list[tuple[str, int]]:
    """What serve asks the broker for, next to the job's up topics."""
    return [(topic, 0) for topic in (*SYS_COUNTERS, SYS_VERSION)]


class Accounting:
    """Per-source counters of refusals that the core's worker stats do not hold.

    ``is_known(wid)`` tells whether the PS has a record of that worker id.
    """

    def __init__(self, job: str, is_known: Callable[[str], bool]) -> None:
        self.job = job
        self.is_known = is_known
        self.rejected: dict[str, Counter[str]] = {}  # at ingest, by source
        self.dropped: dict[str, Counter[str]] = {}  # wire-level, by source
        self.sys: dict[str, int] = {}
        self.sys_heard = False  # anything on our $SYS topics, the version included
        self.sys_malformed = 0
        self._seen: dict[str, int] = {}
        self._seen_total = 0

    def source(self, topic: str) -> str:
        """The worker a message on ``topic`` is charged to, or ``unknown``."""
        parsed = wire.parse_up_topic(topic)
        if parsed is None or parsed[0] != self.job or not self.is_known(parsed[1]):
            return UNKNOWN
        return str(parsed[1])

    def worker_source(self, worker_id: str) -> str:
        return worker_id if self.is_known(worker_id) else UNKNOWN

    def rejected_at_ingest(self, worker_id: str, reason: str) -> None:
        self.rejected.setdefault(self.worker_source(worker_id), Counter())[reason] += 1

    def after_feed(self, topic: str, dropped: Mapping[str, int]) -> None:
        """Charge what ``dropped`` (ingest's job-wide counts) gained to the topic."""
        total = sum(dropped.values())
        if total == self._seen_total:
            return
        who = self.dropped.setdefault(self.source(topic), Counter())
        for reason, n in dropped.items():
            gained = n - self._seen.get(reason, 0)
            if gained > 0:
                who[reason] += gained
        self.resync(dropped)

    def resync(self, dropped: Mapping[str, int]) -> None:
        """Take counts that changed outside a message (expiry) as already charged."""
        self._seen = dict(dropped)
        self._seen_total = sum(self._seen.values())

    def forget(self, worker_id: str) -> None:
        """An id the core forgot: what was charged to it moves to ``unknown``,
        so the per-worker counters stay as many as the workers kept."""
        for table in (self.rejected, self.dropped):
            counts = table.pop(worker_id, None)
            if counts:
                table.setdefault(UNKNOWN, Counter()).update(counts)

    def feed_sys(self, topic: str, payload: bytes) -> None:
        """One ``$SYS`` message; a payload that is no count is counted and dropped."""
        if topic == SYS_VERSION:
            self.sys_heard = True
            return
        name = SYS_COUNTERS.get(topic)
        if name is None:
            return
        self.sys_heard = True
        try:
            value = int(payload.decode("ascii").strip())
            if value < 0:
                raise ValueError(value)
        except (UnicodeDecodeError, ValueError):
            self.sys_malformed += 1
            if self.sys_malformed <= 3:
                log.warning("dropped a malformed $SYS message on %s", topic)
            return
        self.sys[name] = value

    # ---- reports ----

    def dropped_of(self, worker_id: str) -> dict[str, int]:
        return dict(self.dropped.get(worker_id, {}))

    def rejected_of(self, worker_id: str) -> dict[str, int]:
        return dict(self.rejected.get(worker_id, {}))

    def unknown(self, core_rejected: Mapping[str, int]) -> dict[str, Any]:
        """Everything charged to ``unknown``: core and ingest rejections, drops."""
        rejected = Counter(self.rejected.get(UNKNOWN, {}))
        rejected.update(dict(core_rejected))
        dropped = self.dropped.get(UNKNOWN, Counter())
        return {
            "rejected": sum(rejected.values()),
            "rejected_by_reason": dict(sorted(rejected.items())),
            "dropped": sum(dropped.values()),
            "dropped_by_reason": dict(sorted(dropped.items())),
        }

    def broker(self, refused: list[str], inbox_full: int) -> dict[str, Any]:
        """The broker's counters (None where not published) and serve's inbox."""
        if self.sys:
            sys_state = "ok"
        elif all(t in refused for t in SYS_COUNTERS):
            sys_state = "refused"  # the SUBACK said so
        elif self.sys_heard:
            sys_state = "no_counters"  # $SYS readable; counters not published yet
        else:
            sys_state = "unreadable"  # an ACL, or a broker without $SYS
        out: dict[str, Any] = {"sys": sys_state}
        for name in SYS_COUNTERS.values():
            out[name] = self.sys.get(name)
        out["sys_malformed"] = self.sys_malformed
        out["inbox_full"] = int(inbox_full)
        return out
