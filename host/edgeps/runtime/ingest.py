"""Turn raw MQTT messages into parameter-server events, counting what is dropped.

Everything a worker (or anyone on the broker) sends passes through `Ingest`:
topic check, wire decode (HMAC included), job/worker id agreement, chunk
reassembly, decoding of the UPDATE's code to float32 (``edgeps.codecs``) and
the model and codec checks of a HELLO. This is the one
place network input is validated: what comes out is a typed core event the
core can trust, or a ``Rejected`` to send back (a HELLO for another model).
Whatever is wrong is counted per reason, logged and dropped; nothing here
raises into the coordinator loop.
"""

from __future__ import annotations

import logging
import secrets
from collections import Counter
from typing import Any

import numpy as np
from edgeps_worker import wire_host as wire

from edgeps.codecs import CodecError, Compress, decode_update
from edgeps.core.types import Event, Heartbeat, Join, Leave, Push, Rejected
from edgeps.kernels import ModelSpec
from edgeps.runtime.peers import Peer, Peers

log = logging.getLogger(__name__)


def new_session() -> int:
    """A fresh, unguessable, non-zero 64-bit session."""
    return secrets.randbits(64) or 1


class Ingest:
    """Decode, validate, reassemble: `feed(topic, payload, now)` -> event or None.

    ``model`` is the job's model spec text; a HELLO announcing another model is
    answered with ``Rejected(wid, 0, "model_mismatch")`` (empty: no check).
    Each message on ``up/W`` is verified with W's own key (``Peers`` derives
    it from the master key); protocol v1 messages are dropped as ``version``.
    A HELLO becomes a ``Join`` carrying a fresh session (or the current one,
    when it names the current link); one naming an earlier link is a replay.
    ``compress`` is the job's UPDATE code: a HELLO whose ``codecs`` lack it is
    refused (``Rejected(wid, 0, "codec_mismatch")``: a STOP ``codec``), and so is
    one whose ``dtypes`` lack ``params_code`` (the job's PARAMS code); an UPDATE in
    another code, of the wrong length or with bad TOPK indices is a
    ``Rejected(wid, seq, reason)``, counted against the worker.
    """

    def __init__(
        self,
        *,
        job: str,
        n_params: int,
        model: str = "",
        peers: Peers | None = None,
        max_age: float = 30.0,
        max_pending: int = 256,
        max_message: int | None = None,
        compress: Compress | None = None,
        params_code: int = wire.DTYPE_F32,
        local: bool = False,
    ) -> None:
        if not wire.valid_id(job):
            raise ValueError(f"job id must match [A-Za-z0-9_-]{{1,32}}, got {job!r}")
        self.job = job
        self.n_params = n_params
        self.model = model
        self._canonical = _canonical(model)
        self.peers = peers if peers is not None else Peers(job)
        self.compress = compress if compress is not None else Compress()
        self.params_code = params_code  # PARAMS code of releases (--compress-down)
        self.local = local  # the job runs local rounds: pushes may be deltas
        self.codec_arg = self.compress.arg(n_params)
        # an update carries at most n_params float32s (or its code's length, if
        # larger); anything bigger is hostile
        self.max_bytes = max(4 * n_params, self.compress.update_bytes(n_params))
        self.max_message = max_message or (self.max_bytes + 4096)
        self.reassembler = wire.Reassembler(self.max_bytes, max_age, max_pending)
        self.dropped: Counter[str] = Counter()
        # the moments of the HELLO `feed` last turned into a Join (None: none)
        self.hello_moments: Any = None

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

    def feed(self, topic: str, payload: bytes, now: float) -> Event | Rejected | None:
        """One raw message in; a complete event out, or None (partial or dropped)."""
        try:
            return self._feed(topic, payload, now)
        except wire.WireError as exc:
            self.drop(str(getattr(exc, "reason", "wire")), f"from {topic}: {exc}")
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            self.drop("malformed", f"from {topic}: {exc!r}")
        return None

    def _peer_of(self, topic: str) -> Peer | None:
        peer = self.peers.of_topic(topic)
        if peer is not None:
            return peer
        parsed = wire.parse_up_topic(topic)
        if parsed is None:
            self.drop("topic", topic)
            return None
        job, wid = parsed
        if job != self.job:
            self.drop("job", topic)
            return None
        return self.peers.get(wid, topic)

    def _same_model(self, peer: Peer, text: str) -> bool:
        """True if a worker's announced model is ours (or either side names none)."""
        if not text or not self.model or text in (self.model, peer.model_ok):
            return True
        same = self._canonical is not None and _canonical(text) == self._canonical
        if same:
            peer.model_ok = text
        return same

    def _feed(self, topic: str, payload: bytes, now: float) -> Event | Rejected | None:
        peer = self._peer_of(topic)
        if peer is None:
            return None
        wid = peer.worker_id
        if len(payload) > self.max_message:
            self.drop("oversized", f"{len(payload)} bytes from {wid}")
            return None
        msg = wire.decode(payload, key=peer.key, max_len=self.max_message)
        if msg.job != self.job:
            self.drop("job", f"message job {msg.job!r} on {topic}")
            return None
        if msg.wid != wid:
            # a worker may only speak for itself: its id is in the topic ACL
            self.drop("id_mismatch", f"message for {msg.wid!r} on {topic}")
            return None
        kind = msg.type
        if kind == wire.HELLO:
            return self._hello(peer, msg)
        if kind == wire.HEARTBEAT:
            return Heartbeat(wid, int(msg.clock), session=int(msg.session))
        if kind == wire.BYE:
            reason = str(getattr(msg, "reason", "") or "bye")
            kind_of = "last_will" if reason == "lost" else "bye"
            peer.end_link(int(msg.nonce))
            return Leave(wid, kind_of, nonce=int(msg.nonce))
        if kind == wire.UPDATE:
            seen = self.reassembler.duplicates
            whole = self.reassembler.add(msg, now)
            if self.reassembler.duplicates != seen:
                # a redelivered chunk of an update that was already complete
                self.dropped["duplicate_chunk"] += self.reassembler.duplicates - seen
            return None if whole is None else self._push(peer, whole)
        self.drop("type", f"type {kind} on an up topic from {wid}")
        return None

    def _hello(self, peer: Peer, msg: Any) -> Join | Rejected | None:
        wid, nonce = peer.worker_id, int(msg.nonce)
        self.hello_moments = None
        if nonce in peer.old_nonces:
            self.drop("replay", f"hello of an earlier link from {wid}")
            return None
        peer.hello_nonce = nonce
        model = str(msg.model or "")
        if not self._same_model(peer, model):
            # it would push gradients of the wrong shape: tell it, do not join it
            self.drop("model_mismatch", f"{wid}: {model}")
            return Rejected(wid, 0, "model_mismatch")
        code = self.compress.code
        if not int(msg.codecs) >> code & 1:
            # it cannot produce the job's UPDATE code: tell it, do not join it
            self.drop(
                "codec_mismatch", f"{wid} makes 0x{int(msg.codecs):02x}, job {code}"
            )
            return Rejected(wid, 0, "codec_mismatch")
        if not int(msg.dtypes) >> self.params_code & 1:
            # it cannot read the job's PARAMS code: the same refusal
            self.drop("codec_mismatch", f"{wid} reads 0x{int(msg.dtypes):02x}")
            return Rejected(wid, 0, "codec_mismatch")
        peer.codec, peer.codec_arg = code, self.codec_arg
        self.peers.announce(peer, max(256, int(msg.max_chunk or 4096)))
        same_link = nonce == peer.nonce and peer.session
        self.hello_moments = getattr(msg, "moments", None)
        return Join(
            wid,
            peer.session if same_link else new_session(),
            instance=int(msg.instance),
            nonce=nonce,
            max_batch=int(msg.max_batch),
        )

    def _push(self, peer: Peer, msg: Any) -> Push | Rejected | None:
        steps = int(msg.steps)
        if steps < 1 or steps > 1 and not self.local:
            # a delta the job never asked for would be applied at the server
            # lr, unscaled: refused before the core sees it
            wid, seq = str(msg.wid), int(msg.seq)
            self.drop("steps", f"{steps} local steps from {wid}")
            return Rejected(wid, seq, "steps", int(msg.session))
        update = self._vector(peer, msg)
        if not isinstance(update, np.ndarray):
            return update
        return Push(
            worker_id=msg.wid,
            clock=int(msg.clock),
            seq=int(msg.seq),
            base_version=int(msg.base_version),
            update=update,
            compute_time=float(msg.compute_time),
            samples=int(msg.samples),
            session=int(msg.session),
            loss=float(msg.loss),
            steps=steps,
        )

    def _vector(self, peer: Peer, msg: Any) -> np.ndarray | Rejected | None:
        code = int(getattr(msg, "dtype", wire.DTYPE_F32))
        data = msg.data
        wid, seq = str(msg.wid), int(msg.seq)
        if peer.session and code != peer.codec:
            # only the code its WELCOME named (without a session the core
            # answers, e.g. unknown_worker, which sends the worker to HELLO)
            self.drop("codec", f"code {code} from {wid}, welcomed with {peer.codec}")
            return Rejected(wid, seq, "codec", int(msg.session))
        if code == wire.DTYPE_F32:
            # a wrong length reaches the core, which refuses it as bad_shape
            if len(data) % 4:
                self.drop("length", f"f32 body of {len(data)} bytes from {wid}")
                return None
            return np.frombuffer(data, dtype="<f4")
        try:
            return decode_update(code, data, self.n_params)
        except CodecError as exc:
            self.drop(exc.reason, f"from {wid}: {exc}")
            return Rejected(wid, seq, exc.reason, int(msg.session))


def _canonical(text: str) -> str | None:
    """A model spec's canonical spelling, or None if it does not parse."""
    try:
        return str(ModelSpec.parse(text))
    except (ValueError, TypeError):
        return None
