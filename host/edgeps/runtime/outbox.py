"""Everything the PS sends: WELCOME, releases (PARAMS chunks), REJECT, STOP, MODEL.

Each message to a worker names the run and the worker's session and is
signed with that worker's own key (``Peer.key``); the retained MODEL is
informational and unsigned. A Release naming several workers (a BSP or K-of-N
round, a DSP batch) publishes the parameters once, unsigned, on the shared
topic and sends each worker a small RELEASE carrying the digest of the vector
that copy decodes to, signed with its key (firmware/PROTOCOL.md, Releases).
PARAMS travel in the job's downlink code (``--compress-down``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any, Protocol

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps.core.types import Release
from edgeps.kernels import params_codec
from edgeps.runtime.peers import Peer, Peers
from edgeps.runtime.release_frames import ReleaseFrames

log = logging.getLogger(__name__)

_CODE_NAMES = {v: k for k, v in params_codec.NAMES.items()}
# the final release at a job's end sends at most this many PARAMS bytes in
# all: a job of thousands of workers still ends in bounded time, and a
# worker past the budget keeps the model of its last release
FINAL_BYTES = 64 << 20


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
        params_code: int = wire.DTYPE_F32,
        shared: bool = True,
        welcome: dict[str, Any] | None = None,
    ) -> None:
        self.link = link
        # the job's local rounds and card, in every WELCOME (runtime.welcome)
        self.welcome_fields = dict(welcome or {})
        self.peers = peers
        self.job = peers.job
        self.model_text = model
        self.run = run
        self.send_rejects = send_rejects
        self.params_code = params_code
        self.shared = shared  # one shared PARAMS per multi-worker release
        self.params_topic = wire.topic_params(self.job)
        self.releases_sent = 0
        self.last_model: bytes | None = None  # the retained MODEL published last
        self.errors = 0
        self.rounds = 0  # Release actions carried out
        self.shared_rounds = 0  # of which published once on the shared topic
        self.params_bytes = 0  # PARAMS bytes published, own and shared
        self.release_bytes = 0  # RELEASE bytes published
        self.multi_rounds = 0  # releases naming several workers (BSP/K-of-N/DSP)
        self.multi_bytes = 0  # PARAMS + RELEASE bytes those published

    def stats(self) -> dict[str, Any]:
        """Downlink counters (`serve --json`: ``releases``)."""
        rounds = max(1, self.rounds)
        multi = max(1, self.multi_rounds)
        return {
            "code": _CODE_NAMES[self.params_code],
            "shared": self.shared,
            "rounds": self.rounds,
            "shared_rounds": self.shared_rounds,
            "releases": self.releases_sent,
            "params_bytes": self.params_bytes,
            "release_bytes": self.release_bytes,
            "params_bytes_per_round": round(self.params_bytes / rounds, 1),
            "bytes_per_round": round(
                (self.params_bytes + self.release_bytes) / rounds, 1
            ),
            "multi_rounds": self.multi_rounds,
            "bytes_per_multi_round": round(self.multi_bytes / multi, 1),
        }

    def model(self, state: str, version: int, n_params: int) -> None:
        """Retained MODEL message: run, job state, model spec and current version."""
        payload = wire.encode_model(
            self.job, self.run, state, self.model_text, int(version), int(n_params)
        )
        self.link.publish(wire.topic_model(self.job), payload, 1, True)
        self.last_model = bytes(payload)

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
            **self.welcome_fields,
        )
        self.link.publish(peer.down_topic, payload, 1, False)

    def stop(self, peer: Peer, session: int, reason: str) -> None:
        """End a worker: its session, or the nonce of a HELLO that is refused."""
        payload = wire.encode_stop(
            self.job, peer.worker_id, self.run, session, reason, key=peer.key
        )
        self.link.publish(peer.down_topic, payload, 1, False)

    def final(
        self,
        peers: Iterable[Peer],
        version: int,
        params: np.ndarray,
        budget: int = FINAL_BYTES,
    ) -> int:
        """The job's final parameters to each peer before its STOP done: its own
        signed PARAMS on its down topic, F32 whatever ``--compress-down`` says
        (the model a worker keeps is the one the host evaluated), seq 0, batch
        0. At most ``budget`` bytes in all; returns how many peers got it."""
        body = np.ascontiguousarray(params, dtype="<f4").tobytes()
        sent = spent = skipped = 0
        for peer in peers:
            if spent >= budget:
                skipped += 1
                continue
            try:
                chunks = wire.encode_params(
                    self.job,
                    peer.worker_id,
                    self.run,
                    peer.session,
                    int(version),
                    body,
                    max_chunk=peer.max_chunk,
                    key=peer.key,
                )
                for chunk in chunks:
                    self.link.publish(peer.down_topic, chunk, 1, False)
                    spent += len(chunk)
                    self.params_bytes += len(chunk)
            except Exception:  # one dead link must not keep the others waiting
                self.errors += 1
                log.exception("could not send %s the final release", peer.worker_id)
                continue
            sent += 1
            self.releases_sent += 1
        if skipped:
            log.warning(
                "final release: %d workers past the %d-byte budget keep their last",
                skipped,
                budget,
            )
        return sent

    def release(self, release: Release) -> None:
        """Parameters at the release's version to each named worker, QoS 1.

        One worker: PARAMS chunks on its down topic. Several (with ``shared``):
        the PARAMS once on the shared topic, then one RELEASE per worker.
        PARAMS.seq / RELEASE.seq is the seq of the UPDATE each release answers
        (0: none).
        """
        code = self.params_code
        body = params_codec.encode(release.params, code)
        targets = list(release.targets())
        self.rounds += 1
        before = self.params_bytes + self.release_bytes
        if self.shared and len(targets) > 1:
            self._release_shared(release, body, targets)
        else:
            self._release_each(release, body, targets)
        if len(targets) > 1:
            self.multi_rounds += 1
            self.multi_bytes += self.params_bytes + self.release_bytes - before

    def _release_each(
        self, release: Release, body: Any, targets: list[tuple[str, int | None]]
    ) -> None:
        code = self.params_code
        batches = release.batches or {}
        for wid, answer in targets:
            peer = self.peers.get(wid)
            try:
                chunks = wire.iter_params(
                    self.job,
                    wid,
                    self.run,
                    peer.session,
                    int(release.version),
                    body,
                    max_chunk=peer.max_chunk,
                    seq=0 if answer is None else answer,
                    dtype=code,
                    key=peer.key,
                    batch=int(batches.get(wid, 0)),
                )
            except (ValueError, TypeError) as exc:
                self.errors += 1
                log.error("cannot encode a release for %r: %s", wid, exc)
                continue
            for chunk in chunks:
                self.link.publish(peer.down_topic, chunk, 1, False)
                self.params_bytes += len(chunk)
            self.releases_sent += 1

    def _release_shared(
        self, release: Release, body: Any, targets: list[tuple[str, int | None]]
    ) -> None:
        code = self.params_code
        version = int(release.version)
        peers = [self.peers.get(wid) for wid, _ in targets]
        # every subscriber of the shared topic must read it, not only these
        max_chunk = min(self.peers.shared_chunk(), *(p.max_chunk for p in peers))
        try:
            chunks = wire.iter_shared_params(
                self.job,
                self.run,
                version,
                body,
                max_chunk=max_chunk,
                dtype=code,
            )
        except (ValueError, TypeError) as exc:
            self.errors += 1
            log.error("cannot encode a shared release: %s", exc)
            return
        for chunk in chunks:
            self.link.publish(self.params_topic, chunk, 1, False)
            self.params_bytes += len(chunk)
        self.shared_rounds += 1
        digest = params_codec.digest(params_codec.decoded(release.params, code))
        batches = release.batches or {}
        frames = ReleaseFrames(self.job, self.run, version, digest)
        publish = self.link.publish
        for (wid, answer), peer in zip(targets, peers, strict=True):
            try:
                payload = frames.encode(
                    wid,
                    peer.session,
                    0 if answer is None else answer,
                    int(batches.get(wid, 0)),
                    peer.key,
                )
            except (ValueError, TypeError) as exc:
                self.errors += 1
                log.error("cannot encode a release for %r: %s", wid, exc)
                continue
            publish(peer.down_topic, payload, 1, False)
            self.release_bytes += len(payload)
            self.releases_sent += 1

    def reject(
        self, wid: str, seq: int, reason: str, session: int | None = None
    ) -> None:
        """Tell a worker why its message was dropped (optional, best effort).

        The REJECT names ``session``, the session of the refused message (None:
        the worker's current one), so only the sender acts on it: replayed
        traffic of an old session never sends a live worker back to HELLO.
        """
        if not self.send_rejects or not wire.valid_id(wid):
            return
        peer = self.peers.get(wid)
        to = peer.session if session is None else int(session)
        if not 0 <= to < 1 << 64:
            return
        try:
            payload = wire.encode_reject(
                self.job, wid, self.run, to, seq, reason, key=peer.key
            )
        except (ValueError, TypeError) as exc:
            self.errors += 1
            log.warning("cannot encode a reject for %r: %s", wid, exc)
            return
        self.link.publish(peer.down_topic, payload, 1, False)
