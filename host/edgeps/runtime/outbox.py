"""Everything the PS sends: WELCOME, releases (PARAMS chunks), REJECT, STOP, MODEL.

Each message to a worker names the run and the worker's session and is
signed with that worker's own key (``Peer.key``); the retained MODEL is
informational and unsigned.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps.core.types import Release
from edgeps.runtime.peers import Peer, Peers

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
        run: int,
        send_rejects: bool = True,
    ) -> None:
        self.link = link
        self.peers = peers
        self.job = peers.job
        self.model_text = model
        self.run = run
        self.send_rejects = send_rejects
        self.releases_sent = 0
        self.errors = 0

    def model(self, state: str, version: int, n_params: int) -> None:
        """Retained MODEL message: run, job state, model spec and current version."""
        payload = wire.encode_model(
            self.job, self.run, state, self.model_text, int(version), int(n_params)
        )
        self.link.publish(wire.topic_model(self.job), payload, 1, True)

    def welcome(self, peer: Peer, n_params: int) -> None:
        """Answer the HELLO that opened ``peer.session`` (its nonce echoed)."""
        payload = wire.encode_welcome(
            self.job,
            peer.worker_id,
            self.run,
            peer.nonce,
            peer.session,
            int(n_params),
            self.model_text,
            key=peer.key,
            codec=peer.codec,
            codec_arg=peer.codec_arg,
        )
        self.link.publish(peer.down_topic, payload, 1, False)

    def stop(self, peer: Peer, session: int, reason: str) -> None:
        """End a worker: its session, or the nonce of a HELLO that is refused."""
        payload = wire.encode_stop(
            self.job, peer.worker_id, self.run, session, reason, key=peer.key
        )
        self.link.publish(peer.down_topic, payload, 1, False)

    def release(self, release: Release) -> None:
        """PARAMS at the release's version, chunked per worker, QoS 1.

        PARAMS.seq is the seq of the UPDATE each release answers (0: none).
        """
        # read-only and shared by every worker: framed without a copy
        data = np.ascontiguousarray(release.params, dtype="<f4").data
        batches = release.batches or {}
        for wid, answer in release.targets():
            peer = self.peers.get(wid)
            try:
                chunks = wire.encode_params(
                    self.job,
                    wid,
                    self.run,
                    peer.session,
                    int(release.version),
                    data,
                    max_chunk=peer.max_chunk,
                    seq=0 if answer is None else answer,
                    key=peer.key,
                    batch=int(batches.get(wid, 0)),
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
        peer = self.peers.get(wid)
        try:
            payload = wire.encode_reject(
                self.job, wid, self.run, peer.session, seq, reason, key=peer.key
            )
        except (ValueError, TypeError) as exc:
            self.errors += 1
            log.warning("cannot encode a reject for %r: %s", wid, exc)
            return
        self.link.publish(peer.down_topic, payload, 1, False)
