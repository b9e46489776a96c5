"""Everything the PS sends: releases (PARAMS chunks), REJECTs and the retained MODEL."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Protocol

import numpy as np
from edgeps_worker import wire_host as wire

log = logging.getLogger(__name__)


class Publisher(Protocol):
    def publish(
        self, topic: str, payload: bytes, qos: int = 1, retain: bool = False
    ) -> Any: ...


class Outbox:
    """Encodes and publishes PS messages; one failed send never hides the others."""

    def __init__(
        self,
        link: Publisher,
        *,
        job: str,
        model: str,
        max_chunk: int = 4096,
        send_rejects: bool = True,
        hmac_key: bytes | None = None,
    ) -> None:
        self.link = link
        self.job = job
        self.model_text = model
        self.max_chunk = max_chunk
        self.send_rejects = send_rejects
        self.chunk_of: dict[str, int] = {}  # per worker, from its HELLO
        self.releases_sent = 0
        self.errors = 0
        self._key: dict[str, Any] = {} if hmac_key is None else {"key": hmac_key}
        self._seq: Counter[str] = Counter()
        self._down: dict[str, str] = {}

    def _topic(self, wid: str) -> str:
        topic = self._down.get(wid)
        if topic is None:
            topic = self._down[wid] = wire.topic_down(self.job, wid)
        return topic

    def model(self, state: str, version: int, n_params: int) -> None:
        """Retained MODEL message: job state, model spec and current version."""
        payload = wire.encode_model(
            self.job, state, self.model_text, int(version), int(n_params), **self._key
        )
        self.link.publish(wire.topic_model(self.job), payload, 1, True)

    def params(self, worker_ids: list[str], version: int, params: np.ndarray) -> None:
        """A release: the parameters at `version`, chunked per worker, QoS1."""
        # the caller's snapshot is a private copy: frame straight from its buffer
        data = np.ascontiguousarray(params, dtype="<f4").data
        for wid in worker_ids:
            self._seq[wid] += 1
            try:
                chunks = wire.encode_params(
                    self.job,
                    wid,
                    int(version),
                    data,
                    max_chunk=self.chunk_of.get(wid, self.max_chunk),
                    seq=self._seq[wid],
                    **self._key,
                )
            except (ValueError, TypeError) as exc:
                self.errors += 1
                log.error("cannot encode a release for %r: %s", wid, exc)
                continue
            topic = self._topic(wid)
            for chunk in chunks:
                self.link.publish(topic, chunk, 1, False)
            self.releases_sent += 1

    def reject(self, wid: str, seq: int, reason: str) -> None:
        """Tell a worker why its message was dropped (optional, best effort)."""
        if not self.send_rejects or not wire.valid_id(wid):
            return
        try:
            # a refused join carries seq -1: the wire field is unsigned
            payload = wire.encode_reject(
                self.job, wid, max(0, seq), reason, **self._key
            )
        except (ValueError, TypeError) as exc:
            self.errors += 1
            log.warning("cannot encode a reject for %r: %s", wid, exc)
            return
        self.link.publish(self._topic(wid), payload, 1, False)
