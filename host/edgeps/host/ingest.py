"""Turn raw MQTT messages into parameter-server events, counting what is dropped.

Everything a worker (or anyone on the broker) sends passes through `Ingest`:
topic check, wire decode (HMAC included), job/worker id agreement, chunk
reassembly and dtype conversion. Whatever is wrong is counted per reason,
logged and dropped; nothing here raises into the coordinator loop.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps.core.types import Push

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Hello:
    worker_id: str
    incarnation: int
    max_chunk: int
    model: str


@dataclass(frozen=True)
class Heartbeat:
    worker_id: str
    clock: int


@dataclass(frozen=True)
class Bye:
    worker_id: str
    reason: str  # "bye" (on purpose) or "last_will" (the broker noticed it dropped)


Event = Hello | Heartbeat | Bye | Push


def _decode_kwargs(hmac_key: bytes | None) -> dict[str, Any]:
    return {} if hmac_key is None else {"key": hmac_key}


class Ingest:
    """Decode, validate, reassemble: `feed(topic, payload, now)` -> event or None."""

    def __init__(
        self,
        *,
        job: str,
        n_params: int,
        hmac_key: bytes | None = None,
        max_age: float = 30.0,
        max_pending: int = 256,
        max_message: int | None = None,
    ) -> None:
        if not wire.valid_id(job):
            raise ValueError(f"job id must match [A-Za-z0-9_-]{{1,32}}, got {job!r}")
        self.job = job
        self.n_params = n_params
        self.hmac_key = hmac_key
        # an update carries at most n_params float32s; anything bigger is hostile
        self.max_bytes = 4 * n_params
        self.max_message = max_message or (self.max_bytes + 4096)
        self.reassembler = wire.Reassembler(self.max_bytes, max_age, max_pending)
        self.dropped: Counter[str] = Counter()
        self.received = 0
        # topic -> worker id for topics already seen valid (bounded below)
        self._topic_wid: dict[str, str] = {}

    def drop(self, reason: str, detail: str = "") -> None:
        """Count and log one dropped message (logged at debug after the first few)."""
        self.dropped[reason] += 1
        level = logging.WARNING if self.dropped[reason] <= 3 else logging.DEBUG
        log.log(level, "dropped a message: %s %s", reason, detail)

    def expire(self, now: float) -> int:
        """Forget partial updates older than max_age (counted as 'expired')."""
        try:
            n = int(self.reassembler.expire(now) or 0)
        except Exception:  # a broken reassembler must not stop the loop
            log.exception("reassembler expire failed")
            return 0
        # the reassembler also expires and evicts on its own inside add()
        for reason in ("expired", "evicted"):
            count = int(getattr(self.reassembler, reason, 0))
            if count:
                self.dropped[reason] = count
        return n

    def feed(self, topic: str, payload: bytes, now: float) -> Event | None:
        """One raw message in; a complete event out, or None (partial or dropped)."""
        self.received += 1
        try:
            return self._feed(topic, payload, now)
        except wire.WireError as exc:
            self.drop(str(getattr(exc, "reason", "wire")), f"from {topic}: {exc}")
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            self.drop("malformed", f"from {topic}: {exc!r}")
        return None

    def _worker_of(self, topic: str) -> str | None:
        wid = self._topic_wid.get(topic)
        if wid is not None:
            return wid
        parsed = wire.parse_up_topic(topic)
        if parsed is None:
            self.drop("topic", topic)
            return None
        job, wid = parsed
        if job != self.job:
            self.drop("job", topic)
            return None
        if len(self._topic_wid) < 4096:  # junk topics cannot grow it without bound
            self._topic_wid[topic] = wid
        return wid

    def _feed(self, topic: str, payload: bytes, now: float) -> Event | None:
        wid = self._worker_of(topic)
        if wid is None:
            return None
        if len(payload) > self.max_message:
            self.drop("oversized", f"{len(payload)} bytes from {wid}")
            return None
        msg = wire.decode(
            payload, max_len=self.max_message, **_decode_kwargs(self.hmac_key)
        )
        if msg.job != self.job:
            self.drop("job", f"message job {msg.job!r} on {topic}")
            return None
        if msg.wid != wid:
            # a worker may only speak for itself: its id is in the topic ACL
            self.drop("id_mismatch", f"message for {msg.wid!r} on {topic}")
            return None
        kind = msg.type
        if kind == wire.HELLO:
            return Hello(
                wid,
                int(msg.incarnation),
                int(getattr(msg, "max_chunk", 0) or 4096),
                str(getattr(msg, "model", "") or ""),
            )
        if kind == wire.HEARTBEAT:
            return Heartbeat(wid, int(getattr(msg, "clock", 0)))
        if kind == wire.BYE:
            reason = str(getattr(msg, "reason", "") or "bye")
            return Bye(wid, "last_will" if reason == "lost" else "bye")
        if kind == wire.UPDATE:
            seen = self.reassembler.duplicates
            whole = self.reassembler.add(msg, now)
            if self.reassembler.duplicates != seen:
                # a redelivered chunk of an update that was already complete
                self.dropped["duplicate_chunk"] += self.reassembler.duplicates - seen
            return None if whole is None else self._push(whole, now)
        self.drop("type", f"type {kind} on an up topic from {wid}")
        return None

    def _push(self, msg: Any, now: float) -> Push | None:
        update = self._vector(msg)
        if update is None:
            return None
        return Push(
            worker_id=msg.wid,
            clock=int(msg.clock),
            seq=int(msg.seq),
            base_version=int(msg.base_version),
            update=update,
            compute_time=float(msg.compute_time),
            samples=int(msg.samples),
            incarnation=int(msg.incarnation),
            loss=float(msg.loss),
        )

    def _vector(self, msg: Any) -> np.ndarray | None:
        dtype = getattr(msg, "dtype", wire.DTYPE_F32)
        data = msg.data
        if dtype == wire.DTYPE_F32:
            if len(data) % 4:
                self.drop("length", f"f32 body of {len(data)} bytes from {msg.wid}")
                return None
            return np.frombuffer(data, dtype="<f4")
        if dtype == wire.DTYPE_F16:
            if len(data) % 2:
                self.drop("length", f"f16 body of {len(data)} bytes from {msg.wid}")
                return None
            return np.frombuffer(data, dtype="<f2").astype(np.float32)
        self.drop("dtype", f"dtype {dtype} from {msg.wid} is not supported by the host")
        return None
