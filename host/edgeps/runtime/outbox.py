"""Everything the PS sends: releases (PARAMS chunks), REJECTs and the retained MODEL."""

from __future__ import annotations

import logging
from typing import Any, Protocol

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps.core.types import Release
from edgeps.runtime.peers import Peers

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
        peers: Peers,
        *,
        model: str,
        send_rejects: bool = True,
        hmac_key: bytes | None = None,
    ) -> None:
        self.link = link
        self.peers = peers
        self.job = peers.job
        self.model_text = model
        self.send_rejects = send_rejects
        self.releases_sent = 0
        self.errors = 0
        self._key: dict[str, Any] = {} if hmac_key is None else {"key": hmac_key}

    def model(self, state: str, version: int, n_params: int) -> None:
        """Retained MODEL message: job state, model spec and current version."""
        payload = wire.encode_model(
            self.job, state, self.model_text, int(version), int(n_params), **self._key
        )
        self.link.publish(wire.topic_model(self.job), payload, 1, True)

    def release(self, release: Release) -> None:
        """PARAMS at the release's version, chunked per worker, QoS 1.

        PARAMS.seq is the seq of the UPDATE each release answers (0: none).
        """
        # read-only and shared by every worker: framed without a copy
        data = np.ascontiguousarray(release.params, dtype="<f4").data
        for wid, answer in release.targets():
            peer = self.peers.get(wid)
            try:
                chunks = wire.encode_params(
                    self.job,
                    wid,
                    int(release.version),
                    data,
                    max_chunk=peer.max_chunk,
                    seq=0 if answer is None else answer,
                    **self._key,
                )
            except (ValueError, TypeError) as exc:
                self.errors += 1
                log.error("cannot encode a release for %r: %s", wid, exc)
                continue
            for chunk in chunks:
                self.link.publish(peer.down_topic, chunk, 1, False)
            self.releases_sent += 1

    def reject(self, wid: str, seq: int, reason: str) -> None:
        """Tell a worker why its message was dropped (optional, best effort)."""
        if not self.send_rejects or not wire.valid_id(wid):
            return
        try:
            payload = wire.encode_reject(self.job, wid, seq, reason, **self._key)
        except (ValueError, TypeError) as exc:
            self.errors += 1
            log.warning("cannot encode a reject for %r: %s", wid, exc)
            return
        self.link.publish(self.peers.get(wid).down_topic, payload, 1, False)
